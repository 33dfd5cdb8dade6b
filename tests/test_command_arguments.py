"""Management commands given a bad argument stop with a CommandError that says what is wrong
(manage.py prints it on one line and exits 1), not a traceback, and before any slow work."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from reviewer.models import ApiToken, AuditRecord


def evaluate(path) -> None:
    call_command("evaluate_task_classifier", "--data", str(path), stdout=io.StringIO())


def test_evaluate_refuses_a_missing_file(tmp_path):
    with pytest.raises(CommandError, match=r"--data .*missing\.csv: no such file"):
        evaluate(tmp_path / "missing.csv")


def test_evaluate_refuses_a_directory(tmp_path):
    with pytest.raises(CommandError, match="not a file"):
        evaluate(tmp_path)


def test_evaluate_refuses_a_csv_without_a_text_or_label_column(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n", encoding="utf-8")
    with pytest.raises(CommandError, match="no 'text' or 'label' column.*it has 'a', 'b'"):
        evaluate(bad)
    bad.write_text("text,kind\nHello,open\n", encoding="utf-8")
    with pytest.raises(CommandError, match="no 'label' column"):
        evaluate(bad)
    bad.write_text("", encoding="utf-8")
    with pytest.raises(CommandError, match="it has none"):
        evaluate(bad)


def test_evaluate_refuses_a_short_row_an_unknown_label_and_too_few_examples(tmp_path):
    data = tmp_path / "data.csv"
    data.write_text("text,label\nOne,open\nTwo\n", encoding="utf-8")
    with pytest.raises(CommandError, match="line 3: the row has no label"):
        evaluate(data)
    data.write_text("text,label\nOne,open\nTwo,vague\n", encoding="utf-8")
    with pytest.raises(CommandError, match=r"unknown label\(s\) \['vague'\]"):
        evaluate(data)
    data.write_text("text,label\nOne,open\nTwo,open\n", encoding="utf-8")
    with pytest.raises(CommandError, match="holds 2 example.*too few"):
        evaluate(data)


def test_evaluate_refuses_a_file_that_is_not_utf8(tmp_path):
    data = tmp_path / "data.csv"
    data.write_bytes("text,label\nOne,open\n".encode("utf-16"))
    with pytest.raises(CommandError, match="not UTF-8 text"):
        evaluate(data)


def diagnose(*args: str) -> None:
    call_command("diagnose", *args, stdout=io.StringIO())


@pytest.fixture
def prompts(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text("Draft a note: cough.\n", encoding="utf-8")
    return path


def test_diagnose_refuses_a_directory_or_a_file_that_is_not_utf8(tmp_path):
    with pytest.raises(CommandError, match="not a file"):
        diagnose("--prompts", str(tmp_path))
    utf16 = tmp_path / "bin.txt"
    utf16.write_bytes("Draft a note.".encode("utf-16"))
    with pytest.raises(CommandError, match=r"--prompts .*bin\.txt: not UTF-8 text"):
        diagnose("--prompts", str(utf16))


def test_diagnose_refuses_a_model_directory_that_is_missing_or_holds_no_model(tmp_path, prompts):
    with pytest.raises(CommandError, match="--model .*: no such directory"):
        diagnose("--prompts", str(prompts), "--model", str(tmp_path / "nowhere"))
    with pytest.raises(CommandError, match="not a directory"):
        diagnose("--prompts", str(prompts), "--model", str(prompts))
    with pytest.raises(CommandError, match="config.json missing"):
        diagnose("--prompts", str(prompts), "--model", str(tmp_path))


@pytest.mark.parametrize("tokens", ["0", "-3"])
def test_diagnose_refuses_fewer_than_one_new_token(prompts, tokens):
    with pytest.raises(CommandError, match=f"--max-new-tokens {tokens}: generate at least 1"):
        diagnose("--prompts", str(prompts), "--max-new-tokens", tokens)


def test_diagnose_refuses_a_negative_limit_and_a_trace_past_the_prompts(prompts):
    with pytest.raises(CommandError, match="--limit -1: give how many prompts"):
        diagnose("--prompts", str(prompts), "--limit", "-1")
    # before the model runs, not after
    with pytest.raises(CommandError, match="--trace 2: give a prompt number from 1 to 1"):
        diagnose("--prompts", str(prompts), "--trace", "2", "--model", "/nowhere")


@pytest.mark.django_db
def test_create_api_token_refuses_an_inactive_user(django_user_model):
    django_user_model.objects.create_user("gone", password="gone-password-1", is_active=False)
    out = io.StringIO()
    with pytest.raises(CommandError, match="'gone' is inactive"):
        call_command("create_api_token", "gone", stdout=out)
    assert out.getvalue() == ""  # no key printed
    assert not ApiToken.objects.exists()
    assert not AuditRecord.objects.filter(action="api_token_issued").exists()
