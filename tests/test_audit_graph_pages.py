"""The audit graph page tells why it paused in the reader's language; the exports are W3C
PROV-JSON and plain JSON, for the session's reviewers only."""

import json
import re

import pytest
from django.urls import reverse

from reviewer.lifecycle import reports
from reviewer.models import AuditGraph, PausePolicy
from tests.test_audit_graph import policy_pause, running

pytestmark = pytest.mark.django_db

PROV_RELATIONS = {"wasGeneratedBy", "used", "wasAssociatedWith", "wasInformedBy", "wasDerivedFrom"}


@pytest.fixture
def paused(alice):
    session = running(alice)
    PausePolicy.objects.create(
        domain=session.domain, name="Unsure", name_zh="不确定", kind="low_confidence",
        params={"threshold": 0.35},
    )  # fmt: skip
    policy_pause(session)
    return session


def get(client, user, name: str, session, language: str = "en"):
    client.force_login(user)
    client.cookies["django_language"] = language
    return client.get(reverse(name, args=[session.pk]), HTTP_ACCEPT_LANGUAGE=language)


def test_it_says_why_it_paused_here_in_english(client, alice, paused):
    page = get(client, alice, "audit-graphs", paused).content.decode()
    assert (
        "It paused here because Unsure fired: Top-1 probability 8% is below 35%, after entropy"
        " of 4.02 nats (above the session&#x27;s usual range, up to 1.03)." in page
    )  # the top-1 reading the reason states already is not said twice
    assert page.count('class="node node-') == 4  # two readings, the policy, the pause
    assert "<svg" in page and 'marker-end="url(#arrow-' in page


def test_it_says_why_it_paused_here_in_chinese(client, alice, paused, compiled_catalogs):
    page = get(client, alice, "audit-graphs", paused, "zh-hans").content.decode()
    assert "在此暂停，因为“不确定”触发" in page
    assert "此前熵 4.02 奈特（超出本会话通常范围的上限 1.03）。" in page
    # the arrows say what they mean when pointed at, in the page's language too
    arrows = re.findall(r'class="edge edge-(\w+)"[^>]*><title>([^<]*)</title>', page)
    assert ("paused", "已暂停") in arrows and ("informed", "为其提供依据") in arrows
    assert not [said for _, said in arrows if said.isascii()]


def test_it_exports_the_graphs_as_w3c_prov_json(client, alice, paused):
    response = get(client, alice, "audit-graphs-prov", paused)
    assert response["Content-Type"].startswith("application/json")
    assert "attachment" in response["Content-Disposition"]
    doc = json.loads(response.content)
    assert doc["prefix"]["caesura"].startswith("urn:caesura:")
    assert {"entity", "activity", "agent"} <= doc.keys()
    assert PROV_RELATIONS - {"wasDerivedFrom"} <= doc.keys()
    graph = AuditGraph.objects.get(session=paused)
    pause = doc["activity"][f"s:g{graph.pk}/subject"]
    assert pause["prov:type"] == "caesura:Pause" and pause["caesura:digest"] == graph.digest
    reading = doc["entity"][f"s:g{graph.pk}/reading/top1"]
    assert reading["caesura:value"] == {"$": 0.08, "type": "xsd:double"}
    assert doc["agent"]["s:policy/Unsure"]["prov:type"] == "prov:SoftwareAgent"
    used = list(doc["used"].values())
    assert {"prov:activity": f"s:g{graph.pk}/evaluation", "prov:entity": f"s:g{graph.pk}/reading/top1",
            "caesura:relation": "informed"} in used  # fmt: skip
    for kind in PROV_RELATIONS & doc.keys():  # every relation names things the document has
        for relation in doc[kind].values():
            for member, ident in relation.items():
                if member.startswith("prov:") and member != "prov:type":
                    assert any(ident in doc[k] for k in ("entity", "activity", "agent")), ident


def test_it_exports_the_graphs_as_plain_json_with_their_chain_records(client, alice, paused):
    body = json.loads(get(client, alice, "audit-graphs-json", paused).content)
    (graph,) = body["graphs"]
    stored = AuditGraph.objects.get(session=paused)
    assert graph["digest"] == stored.digest and graph["graph"] == stored.graph
    assert graph["chain"]["record"] > stored.record_id and len(graph["chain"]["hash"]) == 64


def test_it_shows_another_reviewers_graphs_to_nobody_else(client, bob, paused):
    assert get(client, bob, "audit-graphs", paused).status_code == 404
    assert get(client, bob, "audit-graphs-prov", paused).status_code == 404


def test_it_says_a_budget_held_the_pause_back(client, alice, paused, compiled_catalogs):
    budget = {
        "rule": "budget",
        "detail": "over the pause budget, 4 tokens after the last pause; the budget asks for 20",
    }
    flag = {
        "position": 18, "policy": "Unsure", "kind": "low_confidence", "action": "flag",
        "reason": "Top-1 probability 0.08 is below 0.35 (not paused: over the pause budget)",
        "evidence": {"top1_prob": 0.08, "threshold": 0.35, "budget": budget},
        "span": None, "rollback_to": None,
    }  # fmt: skip
    reports.record_flag(paused, flag)
    page = get(client, alice, "audit-graphs", paused).content.decode()
    assert (
        "It did not pause here: Unsure fired (Top-1 probability 8% is below 35%), but the"
        " pause budget held it back (4 tokens after the last pause, where the budget asks for 20)"
    ) in page
    zh = get(client, alice, "audit-graphs", paused, "zh-hans").content.decode()
    assert "暂停预算" in zh
