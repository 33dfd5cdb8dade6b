"""The engine package must stay usable without the web layer."""

import ast
from pathlib import Path

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
