"""docker-compose.yml must describe the whole stack (checked without a Docker engine)."""

from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parent.parent / "docker-compose.yml"


def test_it_defines_the_four_services_with_healthchecks_and_a_data_volume():
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "redis", "web", "worker"}
    assert all("healthcheck" in service for service in services.values())
    assert "caesura-data:/data" in services["web"]["volumes"]
    assert "caesura-data:/data" in services["worker"]["volumes"]
    assert "caesura-data" in compose["volumes"]
    assert services["web"]["environment"]["CAESURA_DATA_DIR"] == "/data"


def worker_policy(tmp_path: Path, backend: str, **env: str) -> str:
    """The OpenMP wait policy the worker's command starts celery with, run by sh with stand-ins
    for python and celery (after compose's own ``$$`` -> ``$``)."""
    import os
    import subprocess

    command = yaml.safe_load(COMPOSE.read_text())["services"]["worker"]["command"]
    assert command[:2] == ["sh", "-c"]
    for name, body in {"python": "exit 0", "celery": 'echo "${OMP_WAIT_POLICY:-unset}"'}.items():
        stand_in = tmp_path / name
        stand_in.write_text(f"#!/bin/sh\n{body}\n")
        stand_in.chmod(0o755)
    clean = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    run_env = {**clean, "PATH": f"{tmp_path}:/usr/bin:/bin", "CAESURA_BACKEND": backend, **env}
    script = command[2].replace("$$", "$")
    return subprocess.run(["sh", "-c", script], env=run_env, capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


def test_it_makes_only_the_vllm_worker_wait_passively(tmp_path):
    shared = yaml.safe_load(COMPOSE.read_text())["x-caesura-env"]
    assert "OMP_WAIT_POLICY" not in shared  # the web process and a transformers worker spin
    assert worker_policy(tmp_path, "transformers") == "unset"
    assert worker_policy(tmp_path, "vllm") == "PASSIVE"
    assert worker_policy(tmp_path, "vllm", OMP_WAIT_POLICY="ACTIVE") == "ACTIVE"
