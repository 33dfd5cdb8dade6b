"""The audit graph of a real pause: the real default model in a real Celery worker pauses for a
policy; the graph is stored, completed with the reviewer's decision and hashed into the chain."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from reviewer import lifecycle
from reviewer.lifecycle import audit_graph
from reviewer.models import AuditGraph, AuditRecord, PausePolicy, ReviewSession
from tests.conftest import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.django_db(transaction=True)]

PROMPT = "Write a short clinical note about a patient with chest pain since this morning."


def digests(graph: AuditGraph) -> list[str]:
    records = AuditRecord.objects.filter(action="audit_graph", payload__graph=graph.pk)
    return [r.payload["digest"] for r in records.order_by("id")]


def test_it_keeps_the_graph_of_a_real_policy_pause_in_the_chain(
    celery_worker_process, alice, plain_domain
):
    PausePolicy.objects.create(
        domain=plain_domain, name="Unsure", kind="low_confidence", params={"threshold": 0.3}
    )
    sid = lifecycle.start_session(alice, "Plain", PROMPT, seed=3, max_new_tokens=60)["id"]
    paused = lambda: ReviewSession.objects.get(pk=sid).status in ("paused", "generated")  # noqa: E731
    wait_for(paused, timeout=180, what="the policy's pause")
    session = ReviewSession.objects.get(pk=sid)
    assert session.status == "paused", "the policy never fired"
    pause = session.pauses.get()
    wait_for(
        lambda: bool(ReviewSession.objects.get(pk=sid).pauses.get().attention), what="attention"
    )

    graph = AuditGraph.objects.get(pause=pause)
    nodes = {n["id"]: n for n in graph.graph["nodes"]}
    assert nodes["policy"]["outcome"] == "paused" and nodes["policy"]["name"] == "Unsure"
    top1 = nodes["reading:top1"]  # what the model weighed at the token it paused before
    assert top1["position"] == pause.position and top1["value"] < top1["line"] == 0.3
    assert ("reading:top1", "policy", "informed") in {
        (e["from"], e["to"], e["relation"]) for e in graph.graph["edges"]
    }
    # Built at the pause, and again with its attention per head where that added a fact: each
    # version the chain holds differs from the one before (no copy of an unchanged rebuild).
    kept = digests(graph)
    assert 1 <= len(kept) <= 2 and len(set(kept)) == len(kept) and kept[-1] == graph.digest

    lifecycle.approve(alice, sid, comment="Read it.")
    graph.refresh_from_db()
    assert graph.complete and graph.graph["nodes"][-1]["type"] == "decision"
    assert digests(graph)[-1] == graph.digest == audit_graph.digest(graph.graph)
    call_command("verify_audit")
