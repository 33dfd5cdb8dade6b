"""The two processes `make run` starts: a real ASGI server and a real Celery worker."""

import urllib.request

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_it_serves_login_static_files_and_health(server_url, celery_worker_process):
    login = urllib.request.urlopen(server_url + "/login/").read().decode()
    assert 'name="password"' in login
    css = urllib.request.urlopen(server_url + "/static/reviewer/caesura.css").read().decode()
    assert "--accent" in css
    health = urllib.request.urlopen(server_url + "/healthz").read().decode()
    assert '"status": "ok"' in health
