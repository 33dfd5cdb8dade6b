"""What the docs cite, and what of it is missing from the repository.

A citation is one of:
- a relative Markdown link, ``[text](docs/backends.md#vllm-settings)``: the file must exist
  and, with ``#anchor``, hold a heading of that anchor (GitHub's slugs);
- a path in backticks, ``reviewer/events.py``: a token without spaces, outside fenced code,
  that starts with a top-level directory of the repository, or that contains ``/`` and ends
  in a source extension (so a made-up directory is caught too), or a bare file name with a
  source extension (or ``Makefile``, ``Dockerfile``), which must then be a top-level file
  (write other paths from the root);
  a ``*`` in it is a glob that must match;
- a dotted module in backticks, ``inference.loader.load_backend``: its first two names must
  be a module or package of the repository.

Tokens with placeholders (``<id>``, ``{...}``, ``$VAR``), URLs and URL paths (``/api/``) are
not paths. Runtime directories (``var/``, ``artifacts/``) are not in the repository: citations
of them are not checked.
"""

from __future__ import annotations

import re
from pathlib import Path

RUNTIME_DIRS = {"var", "artifacts", "node_modules", "staticfiles", ".venv", ".git"}
SOURCE_EXTENSIONS = {
    ".py", ".js", ".mjs", ".css", ".html", ".md", ".json", ".jsonl", ".yml", ".yaml",
    ".toml", ".txt", ".csv", ".sh", ".po", ".in",
}  # fmt: skip
EXTENSIONLESS_FILES = {"Makefile", "Dockerfile"}
PACKAGES = ("inference", "reviewer", "webapp", "bench", "tests")

FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
DOTTED = re.compile(rf"^({'|'.join(PACKAGES)})\.([A-Za-z_]\w*)")


def prose(text: str) -> str:
    """The text without its fenced code blocks (shell sessions, JSON, Python)."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    plain = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", plain).replace(" ", "-")


def anchors_of(text: str) -> set[str]:
    anchors: set[str] = set()
    for heading in HEADING.findall(prose(text)):
        base = slug(heading)
        anchor, n = base, 0
        while anchor in anchors:  # GitHub numbers repeated headings: name, name-1, name-2
            n += 1
            anchor = f"{base}-{n}"
        anchors.add(anchor)
    return anchors


def leads_somewhere(doc: Path, target: str) -> bool:
    if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: are not checked
        return True
    path, _, anchor = target.partition("#")
    file = (doc.parent / path).resolve() if path else doc
    if not file.exists():
        return False
    return not anchor or (file.suffix == ".md" and anchor in anchors_of(file.read_text()))


def broken_links(doc: Path) -> list[str]:
    """The relative links of one Markdown file that lead nowhere."""
    links = LINK.findall(prose(doc.read_text(encoding="utf-8")))
    return [target for target in links if not leads_somewhere(doc, target)]


def top_level_dirs(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.is_dir() and p.name not in RUNTIME_DIRS}


def is_path(token: str, top_dirs: set[str]) -> bool:
    if any(mark in token for mark in " <>{}$") or "://" in token or token.startswith("/"):
        return False
    first = token.split("/", 1)[0]
    if first in RUNTIME_DIRS:
        return False
    has_extension = Path(token.rstrip("/")).suffix in SOURCE_EXTENSIONS
    if "/" in token:
        return first in top_dirs or has_extension
    return has_extension or token in EXTENSIONLESS_FILES


def exists(token: str, root: Path) -> bool:
    if "*" in token:
        return any(root.glob(token))
    path = root / token
    return path.is_dir() if token.endswith("/") else path.exists()


def module_exists(package: str, name: str, root: Path) -> bool:
    base = root / package / name
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def is_missing(token: str, root: Path, top_dirs: set[str]) -> bool:
    dotted = DOTTED.match(token)
    if dotted:
        return not module_exists(dotted[1], dotted[2], root)
    return is_path(token, top_dirs) and not exists(token, root)


def missing_citations(text: str, root: Path) -> list[str]:
    """The paths and modules cited in backticks that the repository at root lacks."""
    top_dirs = top_level_dirs(root)
    tokens = (token.strip() for token in CODE.findall(prose(text)))
    return [token for token in tokens if is_missing(token, root, top_dirs)]
