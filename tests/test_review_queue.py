"""The session list is a queue: what waits for the reviewer's decision first, newest first,
paged; "next case" opens the next one waiting."""

from __future__ import annotations

import re

import pytest

from reviewer.models import ReviewSession
from reviewer.web.views import PAGE_SIZE
from tests.session_factory import make_session

pytestmark = pytest.mark.django_db
S = ReviewSession


def listed(client, **query) -> list[int]:
    page = client.get("/", query).content.decode()
    ids = re.findall(r'<td><a href="/sessions/(\d+)/"', page)
    return [int(i) for i in ids]


def test_it_lists_what_waits_for_a_decision_first_then_newest_first(client, alice):
    old_done = make_session(alice, status=S.COMPLETED)
    old_paused = make_session(alice, status=S.PAUSED)
    new_done = make_session(alice, status=S.REJECTED)
    generated = make_session(alice, status=S.GENERATED)
    running = make_session(alice, status=S.RUNNING)
    client.force_login(alice)
    assert listed(client) == [generated.pk, old_paused.pk, running.pk, new_done.pk, old_done.pk]
    page = client.get("/").content.decode()
    assert page.count("needs your decision") == 2


def test_it_pages_the_list(client, alice):
    made = [make_session(alice, status=S.COMPLETED).pk for _ in range(PAGE_SIZE + 3)]
    client.force_login(alice)
    first = listed(client)
    assert first == sorted(made, reverse=True)[:PAGE_SIZE]
    second = listed(client, page=2)
    assert second == sorted(made, reverse=True)[PAGE_SIZE:]
    assert "Page 2 of 2" in client.get("/", {"page": 2}).content.decode()
    assert listed(client, page="nonsense") == first  # a bad page number shows the first


def test_next_case_opens_the_newest_other_session_waiting_for_me(client, alice, bob):
    first = make_session(alice, status=S.GENERATED)
    second = make_session(alice, status=S.PAUSED)
    make_session(bob, status=S.PAUSED)  # Bob's: never Alice's next case
    decided = make_session(alice, status=S.COMPLETED)
    client.force_login(alice)
    answer = client.get("/sessions/next", {"from": decided.pk})
    assert answer.status_code == 302 and answer["Location"] == f"/sessions/{second.pk}/"
    answer = client.get("/sessions/next", {"from": second.pk})
    assert answer["Location"] == f"/sessions/{first.pk}/"
    for odd in ("\u00b2", "9" * 30, "x"):  # no session of that id: the newest waiting one
        answer = client.get("/sessions/next", {"from": odd})
        assert answer.status_code == 302 and answer["Location"] == f"/sessions/{second.pk}/"


def test_next_case_says_when_nothing_is_left(client, alice):
    only = make_session(alice, status=S.GENERATED)
    client.force_login(alice)
    answer = client.get("/sessions/next", {"from": only.pk})
    assert answer["Location"] == "/?done=1"
    assert (
        "Nothing else waits for your decision." in client.get(answer["Location"]).content.decode()
    )


def test_it_tells_staff_only_their_own_waiting_sessions_need_their_decision(
    client, alice, django_user_model
):
    """Staff see every session; another reviewer's pause is not theirs to decide, as the
    tab's count of what waits for them already says."""
    admin = django_user_model.objects.create_user("root", password="pw-root-1", is_staff=True)
    make_session(alice, status=S.PAUSED)
    mine = make_session(admin, status=S.GENERATED)
    client.force_login(admin)
    page = client.get("/").content.decode()
    assert page.count("needs your decision") == 1
    row = re.search(rf'<tr id="queue-row-{mine.pk}"[^>]*class="([^"]*)"', page)
    assert row and "waiting" in row.group(1).split()
