"""The engine package must stay usable without the web layer."""

import ast
from pathlib import Path

import pytest

WEB_LAYER = {"django", "channels", "celery", "reviewer", "webapp", "channels_redis", "daphne"}
INFERENCE = Path(__file__).resolve().parent.parent / "inference"


def imported_roots(source: str) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_it_finds_imports_of_every_form():
    source = "import django.db\nfrom celery import shared_task\nif x:\n    import reviewer.models\n"
    assert imported_roots(source) >= {"django", "celery", "reviewer"}


def test_it_keeps_the_web_layer_out_of_inference():
    offenders = {
        str(path.relative_to(INFERENCE)): sorted(imported_roots(path.read_text()) & WEB_LAYER)
        for path in INFERENCE.rglob("*.py")
    }
    assert list(INFERENCE.rglob("*.py")), "inference/ has no modules"
    assert {name: mods for name, mods in offenders.items() if mods} == {}


# --- the web side's layers ---------------------------------------------------------------

ROOT = INFERENCE.parent
# The web side hands work to workers by task name (reviewer/worker/dispatch.py), so nothing a
# request runs through loads the worker runtime or the task module.
WEB_SIDE = [
    "reviewer.lifecycle",
    "reviewer.web.api",
    "reviewer.web.views",
    "reviewer.web.consumers",
    "reviewer.web.command_table",
    "reviewer.gateway.views",
    "reviewer.worker.dispatch",
]
WORKER_SIDE = {
    "reviewer.worker.runtime",
    "reviewer.worker.relay",
    "reviewer.worker.tasks",
    "reviewer.worker.heartbeat",
}


def module_path(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def project_imports(module: str) -> set[str]:
    """The project modules one module imports, anywhere in it (inside functions too)."""
    path = module_path(module)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())) if path else ():
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if module_path(name) and name.split(".")[0] == "reviewer"}


def reachable(module: str) -> set[str]:
    seen, todo = set(), [module]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(project_imports(current))  # a package: what its __init__ imports
    return seen - {module}


def test_it_follows_imports_inside_functions_and_packages():
    assert "reviewer.lifecycle.review" in reachable("reviewer.lifecycle")
    assert "reviewer.worker.runtime" in reachable("reviewer.worker.tasks")
    assert "reviewer.models" in project_imports("reviewer.worker.runtime")


@pytest.mark.parametrize("module", WEB_SIDE)
def test_it_keeps_the_worker_runtime_out_of_the_web_side(module):
    assert module_path(module), f"{module} is gone: update WEB_SIDE"
    assert sorted(reachable(module) & WORKER_SIDE) == []


def test_it_keeps_the_tasks_thin():
    """Tasks take ids and call the worker runtime: no queries, no decisions of their own."""
    tree = ast.parse(module_path("reviewer.worker.tasks").read_text())
    assert "reviewer.models" not in project_imports("reviewer.worker.tasks")
    for func in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        assert len(func.body) <= 6, f"task {func.name} has grown: move its work to the worker"
