"""Message: English text that keeps its template and values for a translation."""

from __future__ import annotations

import pickle

from inference.message import Message, either


def test_it_reads_as_the_english_text_and_keeps_what_made_it():
    message = Message('Policy "%(name)s" is used twice', name="Pain")
    assert message == 'Policy "Pain" is used twice'
    assert message.template == 'Policy "%(name)s" is used twice'
    assert message.values == {"name": "Pain"}


def test_it_survives_pickling_with_a_percent_sign_in_its_text():
    # A failure may cross processes (a Celery result); the English text alone holds a "%",
    # which would not format again, and would lose the template.
    message = Message("must be %(expected)s, not %(value)r", expected="<= 1", value="100%")
    again = pickle.loads(pickle.dumps(message))
    assert again == message and again.template == message.template
    assert again.values == {"expected": "<= 1", "value": "100%"}


def test_it_names_choices_with_or():
    assert either(["pause"]) == '"pause"'
    assert either(["pause", "flag"]) == '"pause" or "flag"'
    assert either(["a", "b", "c"]) == '"a", "b" or "c"'
    assert isinstance(either(["a", "b"]), Message)
