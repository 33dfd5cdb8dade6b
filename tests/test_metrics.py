"""Prometheus metrics at /metrics: the web process sums every process's counters."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from reviewer import lifecycle
from reviewer.analytics import metrics
from reviewer.models import ReviewSession
from tests.conftest import wait_for
from tests.session_factory import make_session
from tests.test_workflow import status_is, tokens_streamed

FAMILIES = {
    "caesura_tokens_generated",
    "caesura_generations",
    "caesura_pauses",
    "caesura_rollbacks",
    "caesura_decode_step_seconds",
    "caesura_manual_pause_latency_seconds",
    "caesura_sessions_running",
    "caesura_sessions_paused",
    "caesura_worker_states",
    "caesura_worker_state_bytes",
}


def scrape(text: str | None = None) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} from the exposition text."""
    text = text if text is not None else Client().get("/metrics").content.decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if "pid" not in s.labels
    }


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.mark.django_db
def test_it_serves_every_metric_in_the_text_format(client, alice):
    make_session(alice, status=ReviewSession.PAUSED)
    metrics.generation_started("open")  # so every labelled family has a sample
    metrics.pause_recorded("manual", 120.0)
    metrics.rollback("engine")
    timer = metrics.StepTimer()
    timer.tick(), timer.tick()
    response = client.get("/metrics")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    names = {f.name for f in text_string_to_metric_families(response.content.decode())}
    assert names >= FAMILIES
    samples = scrape(response.content.decode())
    assert value(samples, "caesura_sessions_paused") == 1
    assert value(samples, "caesura_sessions_running") == 0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.django_db
def test_it_serves_the_same_page_from_a_worker_port(settings):
    port = free_port()
    settings.CAESURA_WORKER_METRICS_PORT = port
    assert metrics.serve_worker_metrics() == port
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            names = {f.name for f in text_string_to_metric_families(answer.read().decode())}
    finally:
        metrics.stop_worker_metrics()
    assert "caesura_tokens_generated" in names


@pytest.mark.django_db
def test_a_workers_scrapes_share_one_database_connection(settings, monkeypatch):
    from django.db import connection

    backends: list[int] = []
    counted = metrics.SessionGauges.collect

    def spied(self):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backends.append(cursor.fetchone()[0])
        yield from counted(self)

    monkeypatch.setattr(metrics.SessionGauges, "collect", spied)
    port = free_port()
    settings.CAESURA_WORKER_METRICS_PORT = port
    assert metrics.serve_worker_metrics() == port
    try:
        for _ in range(3):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
                assert answer.status == 200
    finally:
        metrics.stop_worker_metrics()  # and its thread's connection closes
    assert len(backends) == 3 and len(set(backends)) == 1


def test_it_serves_nothing_from_a_worker_without_a_port(settings):
    settings.CAESURA_WORKER_METRICS_PORT = 0
    assert metrics.serve_worker_metrics() is None


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.django_db(transaction=True)
def test_it_moves_the_counters_after_a_real_worker_session(
    celery_worker_process, alice, plain_domain
):
    before = scrape()
    prompt = "Write a short clinical note about a patient with chest pain."
    sid = lifecycle.start_session(alice, "Plain", prompt, seed=4, max_new_tokens=12)["id"]
    wait_for(tokens_streamed(sid, 3), what="three tokens")
    lifecycle.pause(alice, sid)
    wait_for(status_is(sid, "paused", "generated"), what="the pause")
    session = ReviewSession.objects.get(pk=sid)
    after = scrape()

    tokens = len(session.generated_ids)
    grew = value(after, "caesura_tokens_generated_total") - value(
        before, "caesura_tokens_generated_total"
    )
    assert grew >= tokens > 0
    steps = "caesura_decode_step_seconds_count"
    assert value(after, steps) - value(before, steps) >= tokens - 1  # gaps between tokens
    started = "caesura_generations_total"
    label = {"task_type": session.task_type}
    assert value(after, started, **label) - value(before, started, **label) >= 1
    if session.status == "paused":  # the pause won the race against the token limit
        manual = {"trigger": "manual"}
        assert value(after, "caesura_pauses_total", **manual) > value(
            before, "caesura_pauses_total", **manual
        )
        latency = "caesura_manual_pause_latency_seconds_count"
        assert value(after, latency) > value(before, latency)
        assert value(after, "caesura_sessions_paused") >= 1
    lifecycle.cancel(alice, sid)


@pytest.mark.django_db
def test_it_times_the_gaps_between_tokens_not_what_precedes_the_first():
    before = scrape()
    timer = metrics.StepTimer()
    for _ in range(3):
        timer.tick()
    after = scrape()
    grew = value(after, "caesura_tokens_generated_total") - value(
        before, "caesura_tokens_generated_total"
    )
    steps = "caesura_decode_step_seconds_count"
    assert grew == 3 and value(after, steps) - value(before, steps) == 2


def test_it_documents_an_alert_rule_dividing_rollbacks_by_generations():
    import yaml

    from tests.conftest import REPO

    rules = yaml.safe_load((REPO / "deploy" / "prometheus" / "alerts.yml").read_text())
    rule = rules["groups"][0]["rules"][0]
    assert "caesura_rollbacks_total[5m]" in rule["expr"]
    assert "caesura_generations_total[5m]" in rule["expr"] and "> 0.05" in rule["expr"]


def test_it_names_its_metrics_files_by_host_and_process():
    """Compose's web and worker share the directory and are both pid 1 in their containers:
    files named by the pid alone made one overwrite the other's counters."""
    metrics.rollback("reviewer")  # this process writes its counter file now
    own = metrics.process_identifier()
    assert own.startswith(socket.gethostname().replace("_", "-")) and "_" not in own
    assert (metrics.METRICS_DIR / f"counter_{own}.db").exists()
