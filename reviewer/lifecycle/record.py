"""A session's state record on the web side: which ``Checkpoint`` fields live in the session's
own columns, the rest kept as ``engine_meta``, and the fold of its event log into tokens.

A session row holds the record as of its last save (``generated_ids``, ``text``,
``engine_meta``, ``ids_seq``); the events after ``ids_seq`` hold what came since. The fold is
the one reading of an event log into the current tokens: the worker's recovery, the policy
calibration and the session page (its JavaScript twin, run on the same vectors in
tests/fold_vectors.json) all read it this way.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reviewer import events
from reviewer.models import ReviewSession, SessionEvent

if TYPE_CHECKING:  # the web side loads no model code
    from inference.state import Checkpoint, DecodeState

# The Checkpoint fields a session keeps in columns of its own (the column in brackets where
# the names differ): prompt_ids, generated_ids, params [decoding], policy_specs,
# budget [pause_budget], muted [muted_policies]; skip_before_at is never stored (a rebuilt
# state re-evaluates its first token). Every other field is engine_meta.
IN_COLUMNS = (
    "prompt_ids",
    "generated_ids",
    "params",
    "policy_specs",
    "skip_before_at",
    "budget",
    "muted",
)


@dataclass(frozen=True)
class StoredRecord:
    """What saving a state writes to the session row, copied at once (the state goes on
    changing as it generates)."""

    generated_ids: list[int]
    text: str
    engine_meta: dict[str, Any]


def stored_record(state: DecodeState) -> StoredRecord:
    record = state.to_checkpoint()
    record.histories = _complete_histories(state)
    return StoredRecord(list(state.generated_ids), state.text, engine_meta(record))


def engine_meta(record: Checkpoint) -> dict[str, Any]:
    meta = {k: v for k, v in record.to_dict().items() if k not in IN_COLUMNS}
    # Most sessions have none of these: their meta stays as it was.
    for key in ("notes", "anchors", "recall", "edited_upto"):
        if not meta.get(key):
            meta.pop(key, None)
    return meta


def _complete_histories(state: DecodeState) -> dict[str, Any] | None:
    """Histories one per token, or None mid-step (a rebuild then recomputes them)."""
    histories = state.histories()
    n = len(state.generated_ids)
    return histories if all(len(values) == n for values in histories.values()) else None


def checkpoint_of(session: ReviewSession, ids: list[int]) -> Checkpoint:
    """The session's record (its meta over its own columns) over ``ids``; histories are
    kept only when they still match the ids."""
    from inference.state import Checkpoint

    record = Checkpoint.from_dict(
        session.engine_meta,
        prompt_ids=session.prompt_ids,
        generated_ids=ids,
        params=session.decoding,
        policy_specs=session.policy_specs,
        policy_state=recovered_policy_state(session),
        skip_before_at=None,
        budget=session.pause_budget or None,
        muted=session.muted_policies,
    )
    if len((record.histories or {}).get("top1", [])) != len(ids):
        record.histories = None
    return record


def events_since_save(session: ReviewSession, kinds: Iterable[str]) -> Iterable[SessionEvent]:
    later = SessionEvent.objects.filter(session=session, seq__gt=session.ids_seq, type__in=kinds)
    return later.order_by("seq")


def recovered_ids(session: ReviewSession) -> list[int]:
    """The saved ids, with the events since the save folded over them."""
    tokens = [Token(token_id, "") for token_id in session.generated_ids]
    for event in events_since_save(session, FOLDED):
        apply(tokens, event.type, event.payload)
    return [token.token_id for token in tokens]


def recovered_policy_state(session: ReviewSession) -> dict[str, Any]:
    """The saved policy firings plus the flags raised since the save, so the cooldowns of a
    rebuilt state are what they were (pauses and rollbacks save the record)."""
    state = copy.deepcopy(session.engine_meta.get("policy_state") or {"version": 1})
    fired = state.setdefault("fired", {})
    for event in events_since_save(session, [events.FLAG]):
        flag = event.payload
        span = flag.get("span") or [None, None]
        fired.setdefault(flag["policy"], []).append([flag["position"], *span])
    return state


# --- the fold --------------------------------------------------------------------------------


@dataclass
class Token:
    """One token of the folded log: its id, its text, and the signals stored with it (a token
    event's payload, or an edit's per-token entry; empty where none was stored)."""

    token_id: int
    text: str
    signals: Mapping[str, Any] = field(default_factory=dict)


# The kinds that move tokens (a finish does when it cut a stop string off).
FOLDED = (events.TOKEN, events.ROLLBACK, events.EDITED, events.TRUNCATED, events.FINISH)


def fold(log: Iterable[Mapping[str, Any]], tokens: Iterable[Token] = ()) -> list[Token]:
    """The tokens ``log`` (messages as stored or sent: ``{"type", ...payload}``) leaves,
    starting from ``tokens`` (a saved record's, or none)."""
    folded = list(tokens)
    for message in log:
        apply(folded, message["type"], message)
    return folded


def text_of(tokens: Iterable[Token]) -> str:
    return "".join(token.text for token in tokens)


def apply(tokens: list[Token], kind: str, payload: Mapping[str, Any]) -> None:
    """One event's effect on the tokens, in place; other kinds leave them as they are."""
    if kind == events.TOKEN:
        del tokens[int(payload["position"]) :]
        tokens.append(Token(int(payload["token_id"]), str(payload["text"]), payload))
    elif kind == events.ROLLBACK:
        del tokens[int(payload["removed_from"]) :]
    elif kind in (events.EDITED, events.TRUNCATED):
        _apply_edit(tokens, payload)
    elif kind == events.FINISH and payload.get("cut"):
        _apply_edit(tokens, {**payload["cut"], "text": payload["text"]})


def _apply_edit(tokens: list[Token], payload: Mapping[str, Any]) -> None:
    """An edit carries every id after it and its full text; the tokens from ``token_start``
    on are its pieces when they add up to that text, else one piece holds the new text."""
    ids = [int(i) for i in payload["token_ids"]]
    keep = min(int(payload["token_start"]), len(tokens))
    prefix = text_of(tokens[:keep])
    if not str(payload["text"]).startswith(prefix):
        keep, prefix = 0, ""
    rest = str(payload["text"])[len(prefix) :]
    pieces = list(payload.get("tokens") or [])
    exact = (
        keep == int(payload["token_start"])
        and len(pieces) == len(ids) - keep
        and "".join(str(p["text"]) for p in pieces) == rest
    )
    kept = [Token(ids[i], token.text, token.signals) for i, token in enumerate(tokens[:keep])]
    if exact:
        new = [Token(ids[keep + i], str(p["text"]), p) for i, p in enumerate(pieces)]
    else:
        new = [Token(i, rest if n == 0 else "") for n, i in enumerate(ids[keep:])]
    tokens[:] = kept + new
