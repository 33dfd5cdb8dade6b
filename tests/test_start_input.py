"""Starting a session checks its input against the real model's tokenizer and context."""

import pytest
from django.test import override_settings

from reviewer import lifecycle
from reviewer.models import AuditRecord, ReviewSession

pytestmark = [pytest.mark.model, pytest.mark.django_db]


@override_settings(CAESURA_MAX_INPUT_CHARS=200_000)  # the tokenizer's count decides, not this
def test_it_refuses_an_input_longer_than_the_context_and_creates_nothing(alice, plain_domain):
    huge = "chest pain " * 9000
    with pytest.raises(lifecycle.InvalidInput, match="context"):
        lifecycle.start_session(alice, "Plain", huge, max_new_tokens=10)
    assert ReviewSession.objects.count() == 0 and AuditRecord.objects.count() == 0


def test_it_counts_the_system_prompt_and_the_token_limit(alice, plain_domain):
    from reviewer.web.tokenizer import context_length, prompt_length

    length = prompt_length(plain_domain.system_prompt, "hello")
    assert 5 < length < 100
    with pytest.raises(lifecycle.InvalidInput, match="context"):
        lifecycle.start_session(
            alice, "Plain", "hello", max_new_tokens=context_length() - length + 1
        )
