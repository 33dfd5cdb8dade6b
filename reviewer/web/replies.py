"""What the JSON API answers, declared as pydantic models for its description
(reviewer/web/openapi.py). The serializers in reviewer/web/api.py build the answers; a test
checks real answers against these models, which forbid any key they do not name, so the
description cannot fall behind what is sent."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from reviewer.models import statuses
from reviewer.web.bodies import Decoding

Status = Literal[statuses.STATUSES]  # type: ignore[valid-type]  # the lifecycle's own list


class Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SessionSummary(Reply):
    id: int
    status: Status
    domain: str
    owner: str | None = Field(description="Who started it; null for a gateway generation")
    reviewer: str | None = Field(description="The owner, or the reviewer who claimed it")
    application: str | None = Field(description="The application that sent it through the gateway")
    created_at: datetime
    updated_at: datetime


class PauseBudget(Reply):
    """The domain's pause budget when the session started (empty for a session older than
    budgets)."""

    per_100_tokens: int | None = None
    min_distance: int | None = None
    hold_until_first_word: bool | None = None


class Pause(Reply):
    id: int
    position: int = Field(description="Generated tokens before the pause")
    trigger: str = Field(description="'manual' or the policy's name")
    kind: str = Field(description="The policy's kind, or 'manual'")
    reason: str
    evidence: dict[str, Any]
    alternatives: list[dict[str, Any]] = Field(description="The top-k next tokens at the pause")
    latency_ms: float | None = Field(description="A manual pause: request to halt")
    outcome: str = Field(description="What the reviewer did")
    requested_at: datetime | None
    halted_at: datetime | None
    resumed_at: datetime | None
    attention: dict[str, Any] | None = Field(None, description="Only with ?attention=1")


class EditRecord(Reply):
    id: int
    pause: int | None
    kind: str
    start: int | None
    end: int | None
    token_id: int | None
    text_before: str
    text_after: str
    glossary_term: int | None
    author: str
    applied: bool = Field(description="The worker has applied it")
    error: str
    created_at: datetime


class TaskCorrection(Reply):
    """A reviewer's word on the task type (correct_task)."""

    given: str
    corrected: str
    corrected_by: str
    at: datetime


class Session(SessionSummary):
    input: str
    model: str
    seed: int
    max_new_tokens: int
    decoding: Decoding
    pause_budget: PauseBudget
    muted_policies: list[str] = Field(description="Policies the reviewer muted for this session")
    task_type: str
    task_source: str
    task_correction: TaskCorrection | None
    text: str
    token_ids: list[int]
    ids_seq: int
    last_seq: int
    error: str
    decision_comment: str
    finished_at: datetime | None
    pauses: list[Pause]
    edits: list[EditRecord]


class SessionList(Reply):
    sessions: list[SessionSummary]


class Events(Reply):
    events: list[dict[str, Any]] = Field(description="The events, oldest first")


class CommandResult(Reply):
    id: int
    status: Status
    edit: int | None = Field(None, description="The queued edit, for edit/choose/rollback")
    muted_policies: list[str] | None = Field(None, description="For mute/unmute: all muted now")
    repeated: bool | None = Field(
        None, description="The command id was seen before: this is the first result"
    )
    task_correction: TaskCorrection | None = Field(None, description="For correct_task")
    claimed_by: str | None = Field(None, description="For claim, release and reassign")
    claim_expires_at: datetime | None = Field(None, description="When the claim lapses")


class IssuedToken(Reply):
    key: str = Field(description="Shown once; the old key stops working")
    user: str


class Error(Reply):
    error: str = Field(description="What was wrong, for a person")
    code: str | None = Field(
        None,
        description="Where a client may act on the refusal: edit_pending (409: an edit is"
        " still on its way; the same command succeeds once it is applied) or text_changed"
        " (409: made on another text than the session's; read it again)",
    )


MODELS: tuple[type[Reply], ...] = (
    SessionSummary,
    Session,
    SessionList,
    Events,
    CommandResult,
    IssuedToken,
    Error,
)
