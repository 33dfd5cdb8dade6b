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
    assert b"Review sessions" in response.content


def test_it_refuses_a_wrong_password(client, alice):
    response = client.post("/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert not response.wsgi_request.user.is_authenticated
