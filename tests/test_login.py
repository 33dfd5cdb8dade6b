import pytest

pytestmark = pytest.mark.django_db


def test_it_serves_the_login_page(client):
    response = client.get("/login/")
    assert response.status_code == 200
    assert b'name="password"' in response.content


def test_it_sends_anonymous_visitors_to_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response.url.startswith("/login/")


def test_it_lets_a_reviewer_log_in_and_see_the_session_list(client, alice):
    response = client.post(
        "/login/", {"username": "alice", "password": "alice-password-1"}, follow=True
    )
    assert response.status_code == 200
    assert response.wsgi_request.user == alice
    page = response.content.decode()
    # One name for the page: its tab's title, its heading and the menu's link
    assert "Queue · Caesura</title>" in page and "<h1>Queue</h1>" in page
    assert '<a href="/">Queue</a>' in page and ">Sessions</a>" not in page


def test_it_refuses_a_wrong_password(client, alice):
    response = client.post("/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert not response.wsgi_request.user.is_authenticated


def test_a_refused_login_keeps_the_username_and_says_why_as_an_alert(client, alice):
    page = client.post("/login/", {"username": "alice", "password": "nope"}).content.decode()
    assert 'name="username" id="id_username" value="alice"' in page
    error = page[page.index('id="login-error"') :].split("</p>")[0]
    assert 'role="alert"' in error and "match" in error
    # The password is asked again: it gets the focus, the kept username does not.
    assert "autofocus" not in page[page.index('id="id_username"') :].split(">")[0]
    assert "autofocus" in page[page.index('id="id_password"') :].split(">")[0]
