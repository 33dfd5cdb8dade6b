"""The image's and compose's shell read their switches as the settings do (webapp/env.py):
1/true/yes/on in any case, blanks ignored; the backend's name in any case. Run by sh with
stand-ins for python, daphne and celery (checked without a Docker engine)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent


def image_command() -> str:
    line = next(
        line for line in (REPO / "Dockerfile").read_text().splitlines() if line.startswith("CMD ")
    )
    command = json.loads(line.removeprefix("CMD "))
    assert command[:2] == ["sh", "-c"]
    return command[2]


def run_with_stand_ins(tmp_path: Path, script: str, env: dict[str, str]) -> tuple[str, str]:
    """What the script ran: (daphne's or celery's arguments and OMP_WAIT_POLICY, python's)."""
    calls = tmp_path / "python-calls"
    stand_ins = {
        "python": f'echo "$*" >> {calls}',
        "daphne": 'echo "$*"',
        "celery": 'echo "${OMP_WAIT_POLICY:-unset}"',
    }
    for name, body in stand_ins.items():
        stand_in = tmp_path / name
        stand_in.write_text(f"#!/bin/sh\n{body}\n")
        stand_in.chmod(0o755)
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in {"CAESURA_HTTPS", "CAESURA_DEMO", "CAESURA_BACKEND", "OMP_WAIT_POLICY"}
    }
    run_env = {**clean, "PATH": f"{tmp_path}:/usr/bin:/bin", **env}
    out = subprocess.run(
        ["sh", "-c", script], env=run_env, capture_output=True, text=True, check=True
    ).stdout.strip()
    return out, calls.read_text() if calls.exists() else ""


@pytest.mark.parametrize("value", ["1", "true", "YES", "On", " on "])
def test_the_image_trusts_the_proxy_headers_for_every_spelling_of_on(tmp_path, value):
    daphne, _ = run_with_stand_ins(tmp_path, image_command(), {"CAESURA_HTTPS": value})
    assert "--proxy-headers" in daphne.split()
    assert daphne.endswith("webapp.asgi:application")


@pytest.mark.parametrize("value", [None, "0", "false", "no", "OFF", ""])
def test_the_image_takes_no_proxy_headers_when_off(tmp_path, value):
    env = {} if value is None else {"CAESURA_HTTPS": value}
    daphne, _ = run_with_stand_ins(tmp_path, image_command(), env)
    assert "--proxy-headers" not in daphne.split()


@pytest.mark.parametrize(("value", "seeded"), [("1", True), ("True", True), ("yes", True),
                                              ("0", False), ("off", False), (None, False)])  # fmt: skip
def test_the_image_loads_the_demo_data_for_every_spelling_of_on(tmp_path, value, seeded):
    env = {} if value is None else {"CAESURA_DEMO": value}
    _, python = run_with_stand_ins(tmp_path, image_command(), env)
    assert ("seed_demo" in python) is seeded
    assert "migrate" in python


@pytest.mark.parametrize(("backend", "policy"), [("vllm", "PASSIVE"), ("VLLM", "PASSIVE"),
                                                 (" vLLM ", "PASSIVE"), ("transformers", "unset")])  # fmt: skip
def test_the_compose_worker_reads_the_backend_in_any_case(tmp_path, backend, policy):
    command = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]["worker"][
        "command"
    ]
    assert command[:2] == ["sh", "-c"]
    script = command[2].replace("$$", "$")  # compose's own escaping
    celery, _ = run_with_stand_ins(tmp_path, script, {"CAESURA_BACKEND": backend})
    assert celery == policy
