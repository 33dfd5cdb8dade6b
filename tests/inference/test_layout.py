"""The engine package's shape: no import cycle, and modules a reader can hold in mind."""

from __future__ import annotations

import ast
from pathlib import Path

INFERENCE = Path(__file__).resolve().parents[2] / "inference"
MAX_LINES = 400  # the web side has older modules over it; inference/ keeps under


def module_name(path: Path) -> str:
    parts = path.relative_to(INFERENCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in INFERENCE.rglob("*.py")}


def imports(module: str) -> set[str]:
    """The inference modules ``module`` imports, anywhere in it (inside functions and
    TYPE_CHECKING blocks too): ``from a.b import c`` names a.b.c when c is a module."""
    found: set[str] = set()
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    [*package.split(".")[: len(package.split(".")) - node.level + 1], base]
                ).strip(".")
            found.update(
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            )
    return {name for name in found if name in MODULES and name != module}


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a path that returns to its start, or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return path[path.index(node) :] + [node]
        if node in done:
            return None
        for target in sorted(graph[node]):
            if (found := visit(target, [*path, node])) is not None:
                return found
        done.add(node)
        return None

    return next((c for node in sorted(graph) if (c := visit(node, [])) is not None), None)


def test_it_finds_a_cycle_when_there_is_one():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_it_reads_imports_inside_functions():
    assert "inference.vllm_backend.engine" in imports("inference.vllm_backend.loading")
    assert "inference.transformers_backend.engine" in imports("inference.loader")


def test_inference_has_no_import_cycle():
    graph = {module: imports(module) for module in MODULES}
    assert cycle(graph) is None


def test_the_backends_do_not_import_the_loader():
    backends = [
        m
        for m in MODULES
        if m.startswith(("inference.vllm_backend", "inference.transformers_backend"))
    ]
    assert backends
    assert [m for m in backends if "inference.loader" in imports(m)] == []


def test_no_module_of_inference_is_over_400_lines():
    sizes = {name: len(path.read_text().splitlines()) for name, path in MODULES.items()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
