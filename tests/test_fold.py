"""The fold of a session's event log into its tokens (reviewer/lifecycle/record.py), run on
the shared vectors in tests/fold_vectors.json; the page's JavaScript fold runs the same file.

Each vector: ``{"name", "events", "tokens", "text"}``; ``events`` are messages as stored or
sent (``{"type", "seq", ...payload}``), ``tokens`` the ids and ``text`` the text they fold to.
The fields the fold reads, by kind (every other kind, and every other field, is ignored):

- ``token``: ``position`` (the drawn token's index: what was at or after it is replaced),
  ``token_id``, ``text`` (its piece); its other fields are the token's signals.
- ``rollback`` (the engine's): ``removed_from`` (tokens from this index on are gone).
- ``edited`` / ``truncated`` (a reviewer's edit, choice or rollback to a position):
  ``token_start`` (first token it changed), ``token_ids`` (every id after it), ``text`` (the
  whole text after it), ``tokens`` (a piece per token from ``token_start`` on: ``text`` and
  its signals). When the pieces do not add up to the text after the tokens kept, one piece
  holds that text and the others are empty; when ``text`` does not start with the kept
  tokens' text, nothing is kept.
- ``finish`` with a ``cut`` (a stop string cut off the end): the cut's ``token_start``,
  ``token_ids`` and ``tokens`` with the finish's ``text``, folded as an edit's; without one,
  a finish leaves the tokens.

Events after a save (``ids_seq``) fold over the saved tokens: every vector is also folded
in two parts at every point, the second over what the first left.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reviewer.lifecycle.record import fold, text_of

VECTORS = json.loads((Path(__file__).parent / "fold_vectors.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_it_folds_each_vector_into_its_tokens_and_text(vector):
    tokens = fold(vector["events"])
    assert [t.token_id for t in tokens] == vector["tokens"]
    assert text_of(tokens) == vector["text"]


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_it_folds_the_events_after_a_save_over_the_saved_tokens(vector):
    log = vector["events"]
    for cut in range(len(log) + 1):
        tokens = fold(log[cut:], fold(log[:cut]))
        assert [t.token_id for t in tokens] == vector["tokens"], cut
        assert text_of(tokens) == vector["text"], cut


def test_it_keeps_the_signals_each_token_was_stored_with():
    edited = next(v for v in VECTORS if v["name"].startswith("an edit (replace)"))
    tokens = fold(edited["events"])
    assert tokens[0].signals["probability"] == 0.9  # a token event's
    assert tokens[1].signals["top1"] == 0.8  # the edit's piece
