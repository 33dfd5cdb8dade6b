"""The kinds of session event: one ``TypedDict`` per kind declares its exact payload."""

from __future__ import annotations

from typing import Any, TypedDict


class _Token(TypedDict):
    position: int
    token_id: int
    text: str
    probability: float
    entropy: float
    alternatives: list[dict[str, Any]]
    attention: list[float | None]  # the new token's row over its context ([] if not live)
    similarity: float | None  # its hidden state's cosine to the prompt's; None if not computed


class Token(_Token, total=False):
    """The engine drew a token. ``released`` (a delayed gateway generation's token that lets
    more of its text leave, and the last token of one that ended by itself and that the system
    approves): the characters of its text locked for the application in the same commit, which
    may leave at once (reviewer/lifecycle/reports.py ``record_released_tokens``)."""

    released: int


class PauseReport(TypedDict):
    """What the worker reports of a pause; the stored pause adds its id and latency."""

    position: int
    trigger: str  # the policy's name, or "manual"
    kind: str  # the policy's kind, or "manual"
    reason: str
    evidence: dict[str, Any]
    span: list[int] | None
    decisions: list[dict[str, Any]]
    alternatives: list[dict[str, Any]]
    attention: dict[str, Any]
    text: str
    history: dict[str, Any]
    lookahead: dict[
        str, Any
    ]  # branches: per top alternative, the greedy words after it; ms: its cost


Stages = dict[str, float]  # a manual pause's path, ms from its request (lifecycle.stages_ms)


class Pause(PauseReport):
    """The engine paused, for a policy or the reviewer."""

    pause_id: int
    latency_ms: float | None
    stages: Stages


class Resumed(TypedDict):
    position: int


class EditReport(TypedDict):
    """What the worker reports of an edit applied to the frozen state."""

    kind: str  # replace | choose | truncate | append
    token_start: int
    token_end: int
    new_token_end: int
    char_start: int
    char_end: int
    text_before: str
    text_after: str
    alternatives: list[dict[str, Any]]  # at the new next token
    tokens: list[dict[str, Any]]  # each token from token_start on: text, top1, entropy, similarity
    lookahead: dict[str, Any]  # as a pause's, for the new next token
    attention: dict[str, Any]  # as a pause's, of the new last position ({} when not computed)


class Edited(EditReport):
    """A reviewer's edit (replace, choose, append) is in the frozen state."""

    edit: int
    text: str
    token_ids: list[int]


class Truncated(Edited):
    """A reviewer's rollback to a position (an edit of kind truncate) is in the frozen state."""


class Rollback(TypedDict):
    """The engine rolled back drifting tokens and resamples from ``removed_from``."""

    decision: dict[str, Any]
    removed_from: int
    removed_to: int
    removed_ids: list[int]
    removed_text: str
    attempt: int
    rollbacks: int
    conservative: bool


class Flag(TypedDict):
    """A policy flagged the text without stopping: the position and the policy's decision."""

    position: int
    policy: str
    kind: str
    action: str
    reason: str
    evidence: dict[str, Any]
    span: list[int] | None
    rollback_to: int | None


class Attention(TypedDict):
    """One layer's attention per head at the pause, read from the frozen state."""

    layer: int
    heads: list[list[float | None]]
    position: int


class _PauseDetail(TypedDict):
    """Which open pause a detail belongs to: the pause, and the edit after which it was read
    (None: the pause as it stopped). The page drops a detail of a pause it has moved past."""

    pause_id: int
    edit: int | None
    position: int  # the next token's index: where the detail looks from


class Lookahead(_PauseDetail):
    """What the model would write after each top alternative, computed after the pause was
    reported (the page shows the alternatives at once, their previews when this arrives)."""

    branches: list[dict[str, Any]]
    ms: float


class PauseAttention(_PauseDetail):
    """The attention at the pause (per layer, and per head of one layer), read after it."""

    attention: dict[str, Any]


class Snapshot(_PauseDetail):
    """The frozen state is in the vault: any worker can take the session from here."""

    bytes: int
    ms: float


class _Finish(TypedDict):
    reason: str
    text: str


class Finish(_Finish, total=False):
    """Generation ended by itself (eos, the token limit or a stop string). ``cut`` (a class
    of its own: NotRequired is not read from string annotations): a stop string cut off the
    end (gateway calls), with token_start, token_ids (every id) and tokens (the texts of those
    from token_start on), folded as an edit's."""

    cut: dict[str, Any]


class Muted(TypedDict):
    """A reviewer muted or unmuted one policy for the rest of the session."""

    policy: str
    muted: bool  # the policy's new state
    muted_policies: list[str]  # every policy muted now


class Status(TypedDict):
    status: str


class Claim(TypedDict):
    """Who holds a gateway session for review now (claimed, released, expired, reassigned)."""

    claimed_by: str | None  # username; None when nobody holds it
    expires_at: str | None  # ISO time the claim lapses without activity
    action: str  # claim | release | expire | reassign | renew


class _Message(TypedDict):
    message: str


class Error(_Message, total=False):
    edit: int  # the refused edit, if an edit was refused
    # An engine message's English template and values: each page shows it in its language.
    template: str
    values: dict[str, Any]


TOKEN, PAUSE, RESUMED, EDITED, TRUNCATED = "token", "pause", "resumed", "edited", "truncated"
LOOKAHEAD, PAUSE_ATTENTION, SNAPSHOT = "lookahead", "pause_attention", "snapshot"
ROLLBACK, FLAG, ATTENTION, FINISH, STATUS, ERROR, MUTED, CLAIM = (
    "rollback",
    "flag",
    "attention",
    "finish",
    "status",
    "error",
    "muted",
    "claim",
)

KINDS: dict[str, type] = {
    TOKEN: Token,
    PAUSE: Pause,
    RESUMED: Resumed,
    EDITED: Edited,
    TRUNCATED: Truncated,
    ROLLBACK: Rollback,
    FLAG: Flag,
    ATTENTION: Attention,
    FINISH: Finish,
    STATUS: Status,
    ERROR: Error,
    MUTED: Muted,
    CLAIM: Claim,
    LOOKAHEAD: Lookahead,
    PAUSE_ATTENTION: PauseAttention,
    SNAPSHOT: Snapshot,
}


def mismatches(type: str, payload: dict[str, Any]) -> list[str]:
    """How a payload differs from its kind's declared fields; empty when it matches."""
    kind: Any = KINDS.get(type)  # a TypedDict class: it knows its keys
    if kind is None:
        return [f"unknown kind {type!r}"]
    required, optional = kind.__required_keys__, kind.__optional_keys__
    missing = sorted(required - payload.keys())
    extra = sorted(payload.keys() - required - optional)
    return [f"{type}: missing {key!r}" for key in missing] + [
        f"{type}: undeclared {key!r}" for key in extra
    ]
