"""The demo's credentials file (var/demo_credentials.json, untracked): the demo users' passwords
and the demo application's key, generated on first run and kept. Plain Python, no Django, so
`make run` prints it without starting Django again:

    python -m reviewer.demo.credentials var/demo_credentials.json http://127.0.0.1:8000
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import TypedDict

EXAMPLE_MODEL = "caesura:clinical-note"  # the gateway names a domain's model caesura:<slug>


class DemoCredentials(TypedDict):
    logins: dict[str, str]
    applications: dict[str, str]
    notes: list[str]  # what is not shown, and why (changed in the admin since)


def read(path: Path) -> DemoCredentials:
    """The file's content; an older file held only the logins, as one flat object."""
    data = json.loads(path.read_text()) if path.exists() else {}
    if "logins" not in data:
        return {"logins": dict(data), "applications": {}, "notes": []}
    return {
        "logins": dict(data["logins"]),
        "applications": dict(data.get("applications", {})),
        "notes": list(data.get("notes", [])),
    }


def write(path: Path, credentials: DemoCredentials) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(credentials, indent=2))
    path.chmod(0o600)


def describe(credentials: DemoCredentials, base_url: str) -> list[str]:
    """What a newcomer needs: the logins, the application key and a call to try."""
    lines = ["Demo logins (user / password):"]
    lines += [f"  {user:16} {password}" for user, password in credentials["logins"].items()]
    lines += [f"  ({note})" for note in credentials.get("notes", [])]
    for name, key in credentials["applications"].items():
        lines += [f"{name} key (for /v1/, the OpenAI-compatible gateway): {key}"]
        lines += ["Try it (waits until dr_chen approves it in the review queue):"]
        lines += example(base_url, key)
    return lines


def example(base_url: str, key: str) -> list[str]:
    body = {
        "model": EXAMPLE_MODEL,
        "messages": [{"role": "user", "content": "Draft a note: chest pain since this morning."}],
    }
    return [
        f"  curl {base_url.rstrip('/')}/v1/chat/completions \\",
        f"    -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' \\",
        f"    -d {shlex.quote(json.dumps(body))}",
    ]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m reviewer.demo.credentials FILE BASE_URL", file=sys.stderr)
        return 2
    path = Path(argv[0])
    if not path.exists():
        print(f"{path} does not exist yet: run `python manage.py seed_demo`", file=sys.stderr)
        return 1
    print("\n".join(describe(read(path), argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
