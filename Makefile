# Caesura: `make run` starts everything, `make test` runs the whole suite, `make lint`
# checks style (ruff) and types (mypy: strict on inference/, see pyproject.toml).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum < requirements.txt | cut -d' ' -f1)
PYTEST_ARGS ?=

.PHONY: run test bench lint format venv model services db translations browser clean-venv

run: venv
	@$(PY) manage.py bootstrap
	@scripts/run.sh

test: model services browser translations
	$(PY) -m pytest $(PYTEST_ARGS)

bench: model
	$(PY) bench/engine.py

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

venv: $(STAMP)

$(STAMP): requirements.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Caesura needs Python 3.11"'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	@rm -f $(VENV)/.installed-*
	@touch $@

model: venv
	$(PY) manage.py prepare_model

services: venv
	@$(PY) manage.py check_services

db: services translations
	$(PY) manage.py migrate --no-input -v0
	$(PY) manage.py seed_demo --quiet-logins

# Translation catalogs are compiled in pure Python: no gettext tools needed.
translations: venv
	$(PY) manage.py compile_translations

# Browser tests drive Debian's chromium; install it where missing (needs root), with a CJK
# font so the Chinese pages (and their screenshots) show characters, not boxes.
CJK_FONT := /usr/share/fonts/truetype/wqy/wqy-microhei.ttc
browser:
	@(command -v chromium >/dev/null && test -e $(CJK_FONT)) \
		|| (apt-get update -qq && apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null) \
		|| echo "chromium could not be installed: browser tests will fail"

clean-venv:
	rm -rf $(VENV)
