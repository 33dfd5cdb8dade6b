"""The session page's modules as files: the template preloads exactly the modules the entry
point imports (directly or not), no script is over 400 lines, and only the entry point writes
to `window`. The queue page's entry point is held to the same preloading (and writes nothing)."""

from __future__ import annotations

import re

from tests.conftest import REPO

STATIC = REPO / "frontend" / "static" / "reviewer"
TEMPLATE = REPO / "frontend" / "templates" / "reviewer" / "session_detail.html"
ENTRY = "session-page.js"
QUEUE_TEMPLATE = REPO / "frontend" / "templates" / "reviewer" / "session_list.html"
QUEUE_ENTRY = "queue-page.js"
IMPORT = re.compile(r'from "\./([\w-]+\.js)"')


def imported_from(entry: str) -> set[str]:
    found, todo = set(), [entry]
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo.extend(IMPORT.findall((STATIC / name).read_text()))
    return found


def preloaded_by(template) -> set[str]:
    return set(
        re.findall(
            r"modulepreload\" href=\"{% static 'reviewer/([\w-]+\.js)' %}", template.read_text()
        )
    )


def test_the_template_preloads_every_module_the_page_imports():
    assert preloaded_by(TEMPLATE) == imported_from(ENTRY) - {ENTRY}


def test_the_queue_template_preloads_every_module_the_queue_page_imports():
    assert preloaded_by(QUEUE_TEMPLATE) == imported_from(QUEUE_ENTRY) - {QUEUE_ENTRY}


def test_no_script_is_over_400_lines():
    long = {p.name: n for p in STATIC.glob("*.js") if (n := len(p.read_text().splitlines())) > 400}
    assert long == {}


def test_only_the_entry_point_writes_to_window():
    writers = {
        p.name for p in STATIC.glob("*.js") if re.search(r"\bwindow\.\w+\s*=[^=]", p.read_text())
    }
    assert writers == {ENTRY}
