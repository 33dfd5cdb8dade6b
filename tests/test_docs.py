"""The docs hold together: every relative link and every cited path or module exists, and the
configuration page lists every environment variable the settings read (and no other)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.docs_check import anchors_of, broken_links, missing_citations, slug

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "inference/CONTRACT.md",
]
CONFIGURATION = ROOT / "docs" / "configuration.md"
SETTINGS = ROOT / "webapp" / "settings.py"
VLLM_SETTINGS = ROOT / "inference" / "vllm_backend" / "settings.py"
RUN_SCRIPT = ROOT / "scripts" / "run.sh"
# Where a documented variable may be read: the Python packages, the scripts and the build files.
READERS = ["webapp", "inference", "reviewer", "scripts", "Makefile", "docker-compose.yml"]


def name_of(doc: Path) -> str:
    return str(doc.relative_to(ROOT))


# --- the checker itself ------------------------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small repository: one package with one module, one docs page."""
    (tmp_path / "reviewer").mkdir()
    (tmp_path / "reviewer" / "__init__.py").write_text("")
    (tmp_path / "reviewer" / "events.py").write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "websocket.md").write_text("# Websocket\n\n## Event kinds\n")
    (tmp_path / "Makefile").write_text("")
    return tmp_path


def test_it_makes_github_anchors_of_headings():
    assert slug("One worker, many sessions") == "one-worker-many-sessions"
    assert slug("`make run` and `make test`") == "make-run-and-make-test"
    assert slug("The `pause_at` field") == "the-pause_at-field"
    assert anchors_of("# A\n## A\n```sh\n# not a heading\n```\n") == {"a", "a-1"}


def test_it_reports_a_link_to_a_missing_file_or_heading(repo: Path):
    readme = repo / "README.md"
    readme.write_text(
        "[ok](docs/websocket.md) [ok](docs/websocket.md#event-kinds) [ok](#top)\n"
        "[gone](docs/missing.md) [no heading](docs/websocket.md#commands) [web](https://x.org)\n"
        "# Top\n```md\n[inside code](nowhere.md)\n```\n"
    )
    assert broken_links(readme) == ["docs/missing.md", "docs/websocket.md#commands"]


def test_it_reports_a_cited_path_or_module_that_does_not_exist(repo: Path):
    text = (
        "`reviewer/events.py` `reviewer/` `reviewer/*.py` `Makefile` `reviewer.events.KINDS`\n"
        "`reviewer/commands.py` `frobnicate/engine.py` `reviewer/*.js` `README.md`\n"
        "`reviewer.commands` `events.py` `reviewer/events.py/`\n"
    )
    assert missing_citations(text, repo) == [
        "reviewer/commands.py",
        "frobnicate/engine.py",
        "reviewer/*.js",
        "README.md",
        "reviewer.commands",
        "events.py",
        "reviewer/events.py/",
    ]


def test_it_leaves_alone_what_is_not_a_repository_path(repo: Path):
    text = (
        "`/api/sessions/<id>/pause` `ws/sessions/<id>/` `$CAESURA_DATA_DIR/models/x.py`\n"
        "`var/demo_credentials.json` `artifacts/screenshots/a.png` `https://x.org/a.py`\n"
        "`application/json` `1 / 4 / 8` `model.generate()` `text_before` `POST /api/token`\n"
        "```sh\ncat `reviewer/nowhere.py`\n```\n"
    )
    assert missing_citations(text, repo) == []


def test_it_finds_the_mistake_the_old_readme_made():
    assert missing_citations("built from `reviewer/commands.py`", ROOT) == ["reviewer/commands.py"]


# --- the docs --------------------------------------------------------------------------------


@pytest.mark.parametrize("doc", DOCUMENTS, ids=name_of)
def test_it_links_only_to_files_and_headings_that_exist(doc: Path):
    assert broken_links(doc) == []


@pytest.mark.parametrize("doc", DOCUMENTS, ids=name_of)
def test_it_cites_only_paths_and_modules_that_exist(doc: Path):
    assert missing_citations(doc.read_text(encoding="utf-8"), ROOT) == []


def test_it_keeps_the_readme_to_what_a_newcomer_reads():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


# --- the configuration page --------------------------------------------------------------


def settings_variables() -> set[str]:
    """What webapp/settings.py reads through the env_* helpers (a secret also as NAME_FILE)."""
    found = set()
    for node in ast.walk(ast.parse(SETTINGS.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "").startswith("env_"):
            name = node.args[0].value
            found.add(name)
            if node.func.id == "env_secret":
                found.add(f"{name}_FILE")
    return found


def vllm_variables() -> set[str]:
    """CAESURA_VLLM_<FIELD> for each field of VllmSettings, and the defaults it sets for vLLM."""
    tree = ast.parse(VLLM_SETTINGS.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "VllmSettings":
            found |= {
                f"CAESURA_VLLM_{item.target.id.upper()}"
                for item in node.body
                if isinstance(item, ast.AnnAssign)
            }
        if (
            isinstance(node, ast.Assign)
            and getattr(node.targets[0], "id", "") == "ENVIRONMENT_DEFAULTS"
        ):
            found |= {key.value for key in node.value.keys}
    return found


def run_script_variables() -> set[str]:
    return set(re.findall(r"\$\{(\w+):-", RUN_SCRIPT.read_text()))


def documented_variables() -> set[str]:
    """The variables in the first column of the configuration page's tables."""
    rows = re.findall(r"^\| ([^|]+) \|", CONFIGURATION.read_text(), flags=re.MULTILINE)
    return {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row)}


def source_text() -> str:
    files = []
    for path in (ROOT / name for name in READERS):
        files += [*path.rglob("*.py"), *path.rglob("*.sh")] if path.is_dir() else [path]
    return "\n".join(f.read_text(encoding="utf-8") for f in files)


def test_it_finds_the_variables_the_settings_read():
    assert {"DATABASE_URL", "SECRET_KEY_FILE", "CAESURA_QUEUE"} <= settings_variables()
    assert "CAESURA_VLLM_MAX_NUM_SEQS" in vllm_variables()
    assert run_script_variables() >= {"CAESURA_HOST", "CAESURA_PORT"}


def test_it_documents_every_variable_the_settings_read():
    read = settings_variables() | vllm_variables() | run_script_variables()
    assert sorted(read - documented_variables()) == []


def test_it_documents_no_variable_that_nothing_reads():
    read, source = settings_variables() | vllm_variables() | run_script_variables(), source_text()
    unread = {name for name in documented_variables() - read if name not in source}
    assert sorted(unread) == []
