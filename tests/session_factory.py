"""Review sessions built directly in the state a test needs, and a stand-in for the worker."""

from __future__ import annotations

from django.utils import timezone

from reviewer.lifecycle import inputs, transitions
from reviewer.models import Domain, PauseEvent, ReviewSession

TEXT = "The patient has a fever."
ALTERNATIVES = [
    {"token_id": 42, "text": " cough", "prob": 0.31},
    {"token_id": 7, "text": " rash", "prob": 0.2},
]


def clinical_notes() -> Domain:
    domain, _ = Domain.objects.get_or_create(
        name="Clinical notes",
        defaults={
            "slug": "clinical-notes",
            "specialty": "medical",
            "system_prompt": "Write a note.",
        },
    )
    return domain


def make_session(owner, status: str = ReviewSession.PAUSED, **fields) -> ReviewSession:
    """A session with five generated tokens; a paused one has an open pause with alternatives."""
    session = ReviewSession.objects.create(
        owner=owner,
        domain=clinical_notes(),
        input_text="Fever since Monday.",
        model_name="tiny",
        status=status,
        text=TEXT,
        generated_ids=[11, 12, 13, 14, 15],
        **fields,
    )
    if status == ReviewSession.PAUSED:
        PauseEvent.objects.create(
            session=session,
            position=5,
            trigger="manual",
            kind="manual",
            reason="Reviewer asked",
            evidence={"entropy": 1.5},
            alternatives=ALTERNATIVES,
            attention={"layers": [[0.5, 0.5]]},
            halted_at=timezone.now(),
        )
    return session


def stub_worker(monkeypatch) -> list[int]:
    """No worker: record which sessions would have been handed to one."""
    calls: list[int] = []

    def dispatch(session: ReviewSession) -> None:
        session.segment = f"segment-{len(calls)}"
        session.save(update_fields=["segment"])
        calls.append(session.pk)

    monkeypatch.setattr(transitions, "dispatch_segment", dispatch)
    monkeypatch.setattr(inputs, "check_context_fits", lambda *args: None)
    monkeypatch.setattr(inputs, "check_edit_fits", lambda *args: None)
    monkeypatch.setattr(transitions, "release_state", lambda *args: None)
    return calls
