import pytest
from django.core.exceptions import ImproperlyConfigured

from webapp.env import env_bool, env_int, env_list, env_secret


def test_it_reads_booleans_in_common_spellings(monkeypatch):
    monkeypatch.setenv("FLAG", "yes")
    assert env_bool("FLAG", False) is True
    monkeypatch.setenv("FLAG", "0")
    assert env_bool("FLAG", True) is False


def test_it_refuses_a_malformed_boolean_naming_the_variable(monkeypatch):
    monkeypatch.setenv("FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="FLAG"):
        env_bool("FLAG", False)


def test_it_refuses_a_non_integer_and_a_too_small_integer(monkeypatch):
    monkeypatch.setenv("LIMIT", "ten")
    with pytest.raises(ImproperlyConfigured, match="LIMIT"):
        env_int("LIMIT", 1)
    monkeypatch.setenv("LIMIT", "0")
    with pytest.raises(ImproperlyConfigured, match="at least 1"):
        env_int("LIMIT", 5, minimum=1)


def test_it_splits_lists_and_uses_defaults(monkeypatch):
    monkeypatch.delenv("HOSTS", raising=False)
    assert env_list("HOSTS", ["a"]) == ["a"]
    monkeypatch.setenv("HOSTS", "x.org, y.org,")
    assert env_list("HOSTS", []) == ["x.org", "y.org"]


def test_it_generates_a_secret_once_and_keeps_it(monkeypatch, tmp_path):
    monkeypatch.delenv("TOKEN", raising=False)
    monkeypatch.delenv("TOKEN_FILE", raising=False)
    first = env_secret("TOKEN", tmp_path / "token")
    assert len(first) > 40
    assert env_secret("TOKEN", tmp_path / "token") == first
    assert (tmp_path / "token").stat().st_mode & 0o077 == 0


def test_it_keeps_the_first_secret_when_another_process_wrote_one_meanwhile(monkeypatch, tmp_path):
    import os

    monkeypatch.delenv("TOKEN", raising=False)
    monkeypatch.delenv("TOKEN_FILE", raising=False)
    real_link = os.link

    def raced(source, target):  # another process links its secret in first
        (tmp_path / "token").write_text("theirs")
        real_link(source, target)

    monkeypatch.setattr(os, "link", raced)
    assert env_secret("TOKEN", tmp_path / "token") == "theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["token"]  # no draft left behind


def test_it_prefers_the_variable_then_the_file(monkeypatch, tmp_path):
    (tmp_path / "s").write_text("from-file\n")
    monkeypatch.setenv("TOKEN_FILE", str(tmp_path / "s"))
    monkeypatch.delenv("TOKEN", raising=False)
    assert env_secret("TOKEN", tmp_path / "unused") == "from-file"
    monkeypatch.setenv("TOKEN", "from-env")
    assert env_secret("TOKEN", tmp_path / "unused") == "from-env"
