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
