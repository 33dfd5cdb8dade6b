"""Calibrating a policy on history: the admin replays it over the domain's recent sessions
and sees how often it would pause, where, and whether reviewers acted there."""

from __future__ import annotations

import pytest

from reviewer import lifecycle
from reviewer.analytics.calibration import calibrate, history_of
from reviewer.models import PausePolicy, ReviewSession, SessionEvent
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db

WORDS = [" The", " patient", " is", " definitely", " stable", ".", " Give", " rest", "."]
TOP1 = [0.9, 0.3, 0.95, 0.6, 0.97, 0.9, 0.2, 0.25, 0.9]


def token_event(position: int, text: str, top1: float, similarity: float | None = None) -> dict:
    return {
        "position": position,
        "token_id": position,
        "text": text,
        "probability": round(top1 * 0.9, 4),  # the chosen token's, not always the top-1
        "entropy": 3.0 if top1 < 0.5 else 0.3,
        "alternatives": [
            {"token_id": 1, "text": "x", "prob": top1},
            {"token_id": 2, "text": "y", "prob": 0.05},
        ],
        "attention": [],
        "similarity": similarity,
    }


def stored_session(
    owner, domain, edit_at: int | None = None, similarity: float | None = None
) -> ReviewSession:
    """A generated session whose events are the tokens above; with `edit_at`, the reviewer
    rolled back to that token and the model wrote the same words again; with `similarity`,
    every token stored that similarity to the prompt (without, it stored none, as sessions
    did before it was stored)."""
    session = ReviewSession.objects.create(
        owner=owner,
        domain=domain,
        input_text="Note.",
        model_name="tiny",
        status=ReviewSession.GENERATED,
        text="".join(WORDS),
        generated_ids=list(range(len(WORDS))),
    )
    payloads = [
        ("token", token_event(i, w, p, similarity))
        for i, (w, p) in enumerate(zip(WORDS, TOP1, strict=True))
    ]
    if edit_at is not None:
        truncated = {
            "token_start": edit_at,
            "token_end": len(WORDS),
            "tokens": [],
            "kind": "truncate",
        }
        again = payloads[edit_at:]
        payloads = [*payloads, ("truncated", truncated), *again]
    for seq, (kind, payload) in enumerate(payloads, start=1):
        SessionEvent.objects.create(session=session, seq=seq, type=kind, payload=payload)
    return session


def low_confidence(threshold: float = 0.35, cooldown: int = 0) -> dict:
    params = {"threshold": threshold}
    return {"name": "Unsure", "kind": "low_confidence", "params": params, "cooldown": cooldown}


def test_it_rebuilds_the_final_tokens_from_stored_events(alice, plain_domain):
    session = stored_session(alice, plain_domain, edit_at=6)
    history = history_of(session)
    assert history.text == "".join(WORDS)
    assert [t.top1_prob for t in history.tokens] == TOP1  # from the best alternative
    assert history.interventions[0].start == 6


def unlimited(domain):
    """No pause budget beyond "not before the first word": every firing is a pause."""
    domain.max_pauses_per_100_tokens, domain.min_pause_distance = 100, 0
    domain.save()
    return domain


def test_it_keeps_to_the_domain_s_pause_budget(alice, plain_domain):
    stored_session(alice, plain_domain)
    assert calibrate([low_confidence()], plain_domain).pause_counts == [1]  # 20 apart at least
    assert calibrate([low_confidence()], unlimited(plain_domain)).pause_counts == [3]


def test_it_counts_pauses_per_session_and_per_100_tokens(alice, plain_domain):
    stored_session(alice, plain_domain)
    stored_session(alice, plain_domain, edit_at=6)
    result = calibrate([low_confidence()], unlimited(plain_domain))
    assert result.pause_counts == [3, 3]  # before " patient", " Give" and " rest"
    assert result.median == 3 and result.worst == 3
    assert result.per_100_tokens == pytest.approx(100 * 6 / 18)
    assert result.acted_share == pytest.approx(2 / 6)  # the edited session's last two
    calm = calibrate([low_confidence(cooldown=5)], unlimited(plain_domain))
    assert calm.pause_counts == [2, 2]


def test_it_replays_overconfidence_and_marks_where_it_falls(alice, plain_domain):
    stored_session(alice, plain_domain)
    spec = {"name": "Sure", "kind": "overconfidence", "params": {"threshold": 0.92}}
    (example,) = calibrate([spec], plain_domain).examples
    assert [p.matched for p in example.pauses] == ["definitely"]
    assert [s.text for s in example.segments if s.marks] == ["definitely"]


def drift(name: str = "Wander") -> dict:
    """Pauses when two tokens in a row are uncertain (entropy 3.0 in the tokens above) and
    unlike the prompt."""
    params = {"window": 2, "entropy_threshold": 1.0, "similarity_threshold": 0.5}
    return {"name": name, "kind": "drift", "action": "pause", "params": params}


def test_it_replays_drift_over_the_stored_similarity(alice, plain_domain):
    stored_session(alice, plain_domain, similarity=0.1)
    assert calibrate([drift()], plain_domain).pause_counts == [1]  # the budget: 20 apart
    result = calibrate([drift()], unlimited(plain_domain))
    assert result.skipped == [] and result.without_similarity == 0
    (session,) = result.sessions
    # Uncertain windows end at " patient", " Give" and " rest"; it fires where each begins.
    assert [(p.kind, p.token) for p in session.pauses] == [("drift", 2), ("drift", 7)]


def test_it_finds_no_drift_where_the_text_stays_like_the_prompt(alice, plain_domain):
    stored_session(alice, plain_domain, similarity=0.9)
    assert calibrate([drift()], unlimited(plain_domain)).pause_counts == [0]


def test_it_leaves_out_the_sessions_that_stored_no_similarity(alice, plain_domain):
    stored_session(alice, plain_domain, similarity=0.1)
    stored_session(alice, plain_domain)
    result = calibrate([drift(), low_confidence()], unlimited(plain_domain))
    assert result.recent == 2 and result.without_similarity == 1 and result.skipped == []
    (session,) = result.sessions  # every policy judged every replayed session
    assert {p.kind for p in session.pauses} == {"drift", "low_confidence"}
    assert len(calibrate([low_confidence()], plain_domain).sessions) == 2  # drift alone needs it


def test_it_skips_drift_when_no_session_stored_similarity(alice, plain_domain):
    stored_session(alice, plain_domain)
    result = calibrate([drift(), low_confidence()], plain_domain)
    assert result.skipped == ["Wander"] and result.without_similarity == 1
    assert {p.kind for s in result.sessions for p in s.pauses} == {"low_confidence"}
    alone = calibrate([drift()], plain_domain)
    assert alone.skipped == ["Wander"] and alone.sessions == []  # no zero for what was not run


def test_the_admin_sees_a_signal_policy_replayed_on_opening_its_trial(
    client, admin_user, alice, plain_domain
):
    stored_session(alice, unlimited(plain_domain))
    policy = PausePolicy.objects.create(domain=plain_domain, enabled=False, **low_confidence())
    client.force_login(admin_user)
    url = f"/admin/reviewer/pausepolicy/{policy.pk}/try/"
    page = client.get(url).content.decode()
    assert 'id="calibration-summary"' in page
    assert '<td class="median">3</td>' in page and '<td class="worst">3</td>' in page
    assert '<td class="per-100">33.33</td>' in page
    assert page.count("pause-marker") == 3
    fewer = client.get(url, {"replay": "1", "sessions": "5"}).content.decode()
    assert '<td class="sessions">1</td>' in fewer
    bad = client.get(url, {"replay": "1", "sessions": "0"})
    assert bad.status_code == 200 and "calibration-summary" not in bad.content.decode()
    assert "errorlist" in bad.content.decode()


def test_a_text_policy_keeps_its_sample_trial_and_replays_on_request(
    client, admin_user, alice, plain_domain
):
    stored_session(alice, plain_domain)
    policy = PausePolicy.objects.create(
        domain=plain_domain, name="Rest", kind="keyword", params={"keywords": ["rest"]}
    )
    client.force_login(admin_user)
    url = f"/admin/reviewer/pausepolicy/{policy.pk}/try/"
    assert "calibration-summary" not in client.get(url).content.decode()
    page = client.get(url, {"replay": "1", "sessions": "20"}).content.decode()
    assert '<td class="median">1</td>' in page


def test_it_replays_a_learned_policy(alice, plain_domain, tmp_path):
    from tests.inference.pause_models import learned_spec

    stored_session(alice, plain_domain)
    result = calibrate([learned_spec(tmp_path)], plain_domain)
    assert result.skipped == [] and len(result.sessions) == 1
    pauses = result.sessions[0].pauses
    assert pauses  # "definitely stable." and "Give rest." are what the starter set flags
    assert all(p.kind == "learned" and "reviewer would likely step in" in p.reason for p in pauses)


def test_the_admin_sees_why_drift_was_not_replayed(client, admin_user, alice, plain_domain):
    stored_session(alice, plain_domain)
    policy = PausePolicy.objects.create(domain=plain_domain, **drift())
    client.force_login(admin_user)
    url = f"/admin/reviewer/pausepolicy/{policy.pk}/try/"
    page = client.get(url).content.decode()
    assert 'id="calibration-skipped"' in page and "Not replayed: Wander." in page
    assert "the one recent session did not store it" in page
    assert "calibration-summary" not in page  # no figures for a replay that did not run
    chinese = client.get(url, HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()
    assert "未回放：Wander。" in chinese and "1 个近期会话都没有保存它" in chinese


def test_the_admin_sees_drift_replayed_over_the_sessions_that_stored_similarity(
    client, admin_user, alice, plain_domain
):
    stored_session(alice, unlimited(plain_domain), similarity=0.1)
    stored_session(alice, plain_domain)
    stored_session(alice, plain_domain)
    policy = PausePolicy.objects.create(domain=plain_domain, **drift())
    client.force_login(admin_user)
    page = client.get(f"/admin/reviewer/pausepolicy/{policy.pk}/try/").content.decode()
    assert 'id="calibration-without-similarity"' in page
    assert "replayed over the 1 of 3 recent sessions that stored it" in page
    assert "2 sessions stored none" in page
    assert '<td class="sessions">1</td>' in page and '<td class="median">2</td>' in page
    assert page.count("pause-marker") == 2


CASE = "Write a short clinical note about a patient with high blood pressure and chest pain."
# About the real model's median window entropy and similarity on this case: fires now and then.
REAL_DRIFT = {"window": 6, "entropy_threshold": 2.5, "similarity_threshold": 0.5}


def generated_through_the_worker(owner, seed: int) -> ReviewSession:
    """A real session of the "Plain" domain, resumed at every pause until the model ends."""
    sid = lifecycle.start_session(owner, "Plain", CASE, seed=seed, max_new_tokens=120)["id"]

    def stopped() -> bool:
        return ReviewSession.objects.get(pk=sid).status in {"paused", "generated"}

    while True:
        wait_for(stopped, timeout=180, what="a pause or the end")
        if ReviewSession.objects.get(pk=sid).status == "generated":
            return ReviewSession.objects.get(pk=sid)
        lifecycle.resume(owner, sid)


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.django_db(transaction=True)
def test_drift_replayed_on_stored_sessions_pauses_where_the_worker_does(
    celery_worker_process, alice, plain_domain
):
    """Calibrating before enabling: a session run without drift stores its tokens'
    similarity; replayed over it, drift pauses at the tokens where the same session, run
    again with drift enabled, paused live."""
    before = generated_through_the_worker(alice, seed=3)
    assert not before.pauses.exists()
    spec = {"name": "Wander", "kind": "drift", "action": "pause", "params": REAL_DRIFT}
    PausePolicy.objects.create(domain=plain_domain, **spec)
    after = generated_through_the_worker(alice, seed=3)
    assert after.generated_ids == before.generated_ids  # pausing changed no token
    live = [p.position for p in after.pauses.order_by("halted_at")]
    assert len(live) >= 2, "drift paused less than twice; the comparison would prove little"

    result = calibrate([spec], plain_domain)
    assert result.without_similarity == 0 and result.skipped == []
    replayed = {s.session: [p.token for p in s.pauses] for s in result.sessions}
    assert replayed == {before.pk: live, after.pk: live}


def cut_at_finish(session: ReviewSession) -> ReviewSession:
    """The session's finish cut a stop string that began inside its last token: the piece
    kept of that token comes with its text alone (reviewer/worker/request.py)."""
    cut = {"token_start": 8, "token_ids": list(range(9)), "tokens": [{"text": "."}]}
    seq = SessionEvent.objects.filter(session=session).count() + 1
    payload = {"text": "".join(WORDS), "cut": cut}
    SessionEvent.objects.create(session=session, seq=seq, type="finish", payload=payload)
    return session


def test_it_replays_a_session_whose_finish_cut_a_stop_string(alice, plain_domain):
    cut_at_finish(stored_session(alice, plain_domain))
    result = calibrate([low_confidence()], unlimited(plain_domain))
    assert result.pause_counts == [3]  # the tokens with their signals replay as before
    assert result.tokens == 8  # the cut piece has none to replay
