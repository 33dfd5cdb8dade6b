"""The audit graph of a pause, a flag, a rollback and a failure, built from the stored records
and hashed into the audit chain; verify_audit names a graph that was edited by its pause."""

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from reviewer import events, lifecycle
from reviewer.lifecycle import audit_graph, reports, transitions
from reviewer.models import AuditGraph, AuditRecord, PauseEvent, ReviewSession, SessionEvent
from reviewer.worker import dispatch
from tests.session_factory import make_session, stub_worker

pytestmark = pytest.mark.django_db

S = ReviewSession
UNSURE = {"name": "Unsure", "kind": "low_confidence", "params": {"threshold": 0.35}}
CALM, SPIKE = 1.0, 4.0  # nats: the session's usual entropy, and one step far above it


def token(session, position: int, entropy: float = CALM, top1: float = 0.6) -> None:
    payload = {
        "position": position, "token_id": 100 + position, "text": f" w{position}",
        "probability": top1, "entropy": entropy + 0.01 * (position % 3),
        "alternatives": [{"token_id": 1, "text": " a", "prob": top1}],
        "attention": [], "similarity": None,
    }  # fmt: skip
    SessionEvent.objects.create(
        session=session, seq=events.next_seq(session.pk), type="token", payload=payload
    )


def running(owner, tokens: int = 20, spike_at: int | None = 17) -> ReviewSession:
    session = make_session(owner, status=S.RUNNING, policy_specs=[UNSURE], worker="w1")
    for position in range(tokens):
        token(session, position, SPIKE if position == spike_at else CALM)
    return session


def policy_pause(
    session, position: int = 20, top1: float = 0.08, entropy: float = 2.2
) -> PauseEvent:
    signals = {"top1_prob": top1, "entropy": entropy, "margin": 0.01, "chosen_prob": None,
               "alternatives": [{"token_id": 5, "text": " maybe", "prob": top1}]}  # fmt: skip
    report = {
        "position": position, "trigger": "Unsure", "kind": "low_confidence",
        "reason": f"Top-1 probability {top1} is below 0.35",
        "evidence": {"top1_prob": top1, "threshold": 0.35, "signals": signals},
        "span": None, "decisions": [], "alternatives": signals["alternatives"],
        "attention": {}, "text": "", "history": {}, "lookahead": {},
    }  # fmt: skip
    return reports.record_pause(session, report, None)


def graph_of(**which) -> AuditGraph:
    return AuditGraph.objects.get(**which)


def nodes(graph: AuditGraph) -> dict[str, dict]:
    return {n["id"]: n for n in graph.graph["nodes"]}


def edges(graph: AuditGraph) -> set[tuple[str, str, str]]:
    return {(e["from"], e["to"], e["relation"]) for e in graph.graph["edges"]}


def chain_digests(graph: AuditGraph) -> list[str]:
    records = AuditRecord.objects.filter(action="audit_graph", payload__graph=graph.pk)
    return [r.payload["digest"] for r in records.order_by("id")]


def test_it_explains_a_policy_pause_by_the_readings_that_crossed_a_line(alice, monkeypatch):
    stub_worker(monkeypatch)
    session = running(alice)
    pause = policy_pause(session)
    graph = graph_of(pause=pause)
    found = nodes(graph)
    assert found["policy"]["outcome"] == "paused" and found["policy"]["name"] == "Unsure"
    top1 = found["reading:top1"]
    assert (top1["position"], top1["value"], top1["line"]) == (20, 0.08, 0.35)
    entropy = found["reading:entropy"]  # the session's own mean + 2 sd, not a fixed line
    assert entropy["position"] == 17 and entropy["value"] == SPIKE + 0.02
    assert CALM < entropy["line"] < SPIKE and entropy["mean"] == pytest.approx(1.01, abs=0.01)
    assert edges(graph) >= {
        ("reading:top1", "policy", "informed"),  # what the policy reads
        ("reading:entropy", "subject", "preceded"),  # what it does not
        ("policy", "subject", "paused"),
    }
    assert not graph.complete and chain_digests(graph) == [graph.digest]

    lifecycle.mute(alice, session.pk, "Unsure")
    lifecycle.resume(alice, session.pk)
    graph.refresh_from_db()
    assert graph.complete
    actions = [n["action"] for n in graph.graph["nodes"] if n["type"] == "action"]
    assert actions == ["mute", "resume"]
    assert edges(graph) >= {
        ("subject", "after:0", "followed_by"),
        ("after:0", "policy", "muted"),
        ("after:0", "after:1", "followed_by"),
    }
    assert chain_digests(graph)[-1] == graph.digest == audit_graph.digest(graph.graph)
    call_command("verify_audit")


def test_it_draws_no_entropy_reading_when_the_entropy_stayed_in_the_sessions_range(alice):
    session = running(alice, spike_at=None)
    pause = policy_pause(session, top1=0.5, entropy=CALM)  # above the policy's line too
    found = nodes(graph_of(pause=pause))
    assert "reading:entropy" not in found and "reading:top1" not in found
    assert "policy" in found


def test_it_explains_a_pause_the_budget_held_back(alice):
    session = running(alice)
    budget = {
        "rule": "min_distance",
        "detail": "4 tokens after the last pause; the budget asks for 20",
    }
    flag = {
        "position": 18, "policy": "Unsure", "kind": "low_confidence", "action": "flag",
        "reason": "Top-1 probability 0.08 is below 0.35 (not paused: 4 tokens after ...)",
        "evidence": {"top1_prob": 0.08, "threshold": 0.35, "budget": budget},
        "span": None, "rollback_to": None,
    }  # fmt: skip
    reports.record_flag(session, flag)
    graph = graph_of(subject="flag", session=session)
    policy = nodes(graph)["policy"]
    assert policy["outcome"] == "suppressed" and policy["budget"] == budget
    assert ("policy", "subject", "suppressed") in edges(graph)
    assert ("reading:entropy", "subject", "preceded") in edges(graph)  # the spike at 17
    top1 = nodes(graph)["reading:top1"]  # what the policy read where it fired, from its evidence
    assert (top1["position"], top1["value"]) == (18, 0.08)
    assert ("reading:top1", "policy", "informed") in edges(graph)


def test_it_shows_a_lost_worker_before_the_pause_that_followed(alice, monkeypatch):
    monkeypatch.setattr(dispatch, "segment", lambda *args: None)
    session = running(alice)
    lifecycle.redispatch(session.pk, "w1")
    pause = policy_pause(S.objects.get(pk=session.pk))
    graph = graph_of(pause=pause)
    lost = [n for n in graph.graph["nodes"] if n.get("event") == "redispatched"]
    assert len(lost) == 1 and lost[0]["detail"] == {"lost_worker": "w1"}
    assert (lost[0]["id"], "subject", "preceded") in edges(graph)


def test_it_names_the_outage_behind_a_failure(alice):
    session = running(alice)
    transitions.fail(session.pk, "Redis could not be reached from the worker.")
    graph = graph_of(subject="failure", session=session)
    subject = nodes(graph)["subject"]
    assert subject["cause"] == "redis_outage"
    outage = [n for n in graph.graph["nodes"] if n.get("event") == "redis_outage"]
    assert (outage[0]["id"], "subject", "caused") in edges(graph)
    assert not graph.complete  # a reviewer may still resume a failed session


def test_it_shows_who_asked_for_a_manual_pause(alice, monkeypatch):
    stub_worker(monkeypatch)
    monkeypatch.setattr(transitions, "set_flag", lambda *args: None)
    session = running(alice)
    lifecycle.pause(alice, session.pk)
    report = {
        "position": 20, "trigger": "manual", "kind": "manual", "reason": "Paused: reviewer",
        "evidence": {"source": "control"}, "span": None, "decisions": [],
        "alternatives": [], "attention": {}, "text": "", "history": {}, "lookahead": {},
    }  # fmt: skip
    pause = reports.record_pause(session, report, timezone.now().timestamp())
    graph = graph_of(pause=pause)
    asked = [n for n in graph.graph["nodes"] if n["type"] == "request"]
    assert asked[0]["actor"] == "alice" and "policy" not in nodes(graph)
    assert (asked[0]["id"], "subject", "asked_for") in edges(graph)


def test_it_adds_the_heads_dispersion_once_the_pause_attention_is_read(alice):
    session = running(alice)
    pause = policy_pause(session)
    scattered = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    detail = {"pause_id": pause.pk, "edit": None, "position": 20,
              "attention": {"layers": [], "heads": scattered}}  # fmt: skip
    reports.record_pause_detail(session.pk, events.PAUSE_ATTENTION, detail)
    graph = graph_of(pause=pause)
    assert nodes(graph)["reading:head_dispersion"]["value"] == 0.75
    assert len(chain_digests(graph)) == 2


def test_it_records_no_second_copy_of_a_graph_that_a_rebuild_left_as_it_was(alice):
    """A pause's attention with no heads adds no fact: the chain keeps one version."""
    session = running(alice)
    pause = policy_pause(session)
    detail = {"pause_id": pause.pk, "edit": None, "position": 20, "attention": {"layers": []}}
    reports.record_pause_detail(session.pk, events.PAUSE_ATTENTION, detail)
    assert len(chain_digests(graph_of(pause=pause))) == 1
    transitions.set_status(session, S.RUNNING)  # its story ends: a version that says so
    assert len(chain_digests(graph_of(pause=pause))) == 2


def test_it_names_an_edited_graph_by_its_pause(alice):
    session = running(alice)
    pause = policy_pause(session)
    call_command("verify_audit")
    graph = graph_of(pause=pause)
    forged = {
        **graph.graph,
        "nodes": [n for n in graph.graph["nodes"] if n["id"] != "reading:entropy"],
    }
    AuditGraph.objects.filter(pk=graph.pk).update(graph=forged, digest=audit_graph.digest(forged))
    with pytest.raises(CommandError, match=f"audit graph of pause {pause.pk} .* was altered"):
        call_command("verify_audit")


def test_it_names_the_pause_of_an_edited_digest_in_the_chain(alice):
    session = running(alice)
    pause = policy_pause(session)
    record = AuditRecord.objects.get(action="audit_graph", payload__pause=pause.pk)
    AuditRecord.objects.filter(pk=record.pk).update(payload={**record.payload, "digest": "0" * 64})
    with pytest.raises(CommandError) as raised:
        call_command("verify_audit")
    said = str(raised.value)
    assert f"Audit chain broken at record {record.pk}" in said
    assert f"audit graph of pause {pause.pk}" in said


def test_it_notices_a_deleted_graph(alice):
    session = running(alice)
    pause = policy_pause(session)
    AuditGraph.objects.filter(pause=pause).delete()
    with pytest.raises(CommandError, match=f"pause {pause.pk} .* is missing"):
        call_command("verify_audit")


def test_it_builds_a_graph_again_from_the_records_never_from_an_edited_graph(alice, monkeypatch):
    stub_worker(monkeypatch)
    session = running(alice)
    pause = policy_pause(session)
    graph = graph_of(pause=pause)
    forged = {**graph.graph, "events_through": 0, "nodes": []}
    AuditGraph.objects.filter(pk=graph.pk).update(graph=forged)
    lifecycle.resume(alice, session.pk)  # completes the graph: built again, hashed again
    graph.refresh_from_db()
    assert "reading:entropy" in nodes(graph) and graph.graph["events_through"] > 0
    call_command("verify_audit")  # the forged version was never hashed into the chain


def test_it_completes_open_graphs_and_looks_once_where_none_is_open(
    alice, django_assert_num_queries
):
    session = running(alice)
    pause = policy_pause(session)
    assert not graph_of(pause=pause).complete
    audit_graph.complete_open(session)
    assert graph_of(pause=pause).complete
    with django_assert_num_queries(1):  # no lock and no savepoint for a story already told
        audit_graph.complete_open(session)
