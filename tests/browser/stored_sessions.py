"""Sessions built from the events a worker would have stored, so a browser test can open a
paused or a finished session page without running the model."""

from __future__ import annotations

import functools

from django.utils import timezone

from reviewer import events
from reviewer.lifecycle import audit
from reviewer.models import Domain, PauseEvent, PausePolicy, ReviewSession, SessionEvent

WORDS = ["The", " patient", " reports", " chest", " pain", " since", " this", " morning", "."]
TEXT = "".join(WORDS)
# The same text as a tokenizer may write it: " morning" in two pieces, one word on the page.
PIECES = ["The", " patient", " reports", " chest", " pain", " since", " this", " mor", "ning", "."]
CASE = "58-year-old man with chest pain since this morning. Write the note."
SYSTEM_PROMPT = "Write a note."
ALTERNATIVES = [
    {"token_id": 42, "text": " Blood", "prob": 0.24},
    {"token_id": 7, "text": " He", "prob": 0.19},
    {"token_id": 9, "text": " ECG", "prob": 0.11},
]
EVIDENCE = {"top1_prob": 0.24, "threshold": 0.35}


def ward_domain() -> Domain:
    domain, _ = Domain.objects.get_or_create(
        slug="ward",
        defaults={
            "name": "Ward note",
            "name_zh": "病房记录",
            "specialty": "medical",
            "system_prompt": SYSTEM_PROMPT,
        },
    )
    PausePolicy.objects.get_or_create(
        domain=domain,
        name="Unsure",
        defaults={"name_zh": "不确定", "kind": "low_confidence", "params": {"threshold": 0.35}},
    )
    return domain


def store(session: ReviewSession, type: str, payload: dict) -> None:
    """An event as the worker leaves it (nobody is listening yet, so nothing to broadcast)."""
    SessionEvent.objects.create(
        session=session, seq=events.next_seq(session.pk), type=type, payload=payload
    )


@functools.cache
def prompt() -> tuple[list[int], list[str]]:
    """The case's prompt ids and their texts as the engine builds them, so that the page can
    find the case text among them."""
    from inference.prompt import encode_prompt
    from reviewer.web.tokenizer import tokenizer

    ids = encode_prompt(tokenizer(), CASE, system=SYSTEM_PROMPT)
    return ids, [tokenizer().decode([i]) for i in ids]


def attention_row(texts: list[str], stress: tuple[str, ...]) -> list[float]:
    """A row as a model's look: much on the first position (the sink), more on the words in
    ``stress`` and on the last position than on the rest; it sums to 1."""
    weights = [0.02] * len(texts)
    weights[0] = 1.0
    for i, text in enumerate(texts):
        if text.strip() in stress:
            weights[i] = 0.25
    weights[-1] += 0.15
    total = sum(weights)
    return [round(w / total, 4) for w in weights]


def tokens(session: ReviewSession, pieces: list[str]) -> None:
    texts = prompt()[1]
    for position, word in enumerate(pieces):
        store(
            session,
            "token",
            {
                "position": position,
                "token_id": 100 + position,
                "text": word,
                "probability": max(0.05, 0.9 - 0.07 * position),  # a long text stays above 0
                "entropy": 0.3 + 0.2 * position,
                "alternatives": ALTERNATIVES,
                "attention": attention_row([*texts, *pieces[: position + 1]], ("chest", "pain")),
            },
        )


def pause_attention(pieces: list[str]) -> dict:
    names = [*prompt()[1], *pieces]
    stress = [("chest", "pain"), ("morning",), ("58", "man"), ("pain", "reports")]
    return {
        "layers": [attention_row(names, words) for words in stress],
        "heads": [attention_row(names, words) for words in reversed(stress[1:])],
        "layer": 3,
        "tokens": names,
        "prompt_length": len(prompt()[0]),
        "notes": [],
    }


def pause_payload(pause_id: int, pieces: list[str]) -> dict:
    """The pause as the worker sends it at the halt: its attention follows (pause_details)."""
    return {
        "position": len(pieces),
        "trigger": "Unsure",
        "kind": "low_confidence",
        "reason": "top-1 probability 0.24 < 0.35",
        "evidence": EVIDENCE,
        "span": None,
        "decisions": [],
        "alternatives": ALTERNATIVES,
        "attention": {},
        "text": "".join(pieces),
        "history": {
            "probability": [0.9 - 0.07 * i for i in range(len(pieces))],
            "entropy": [0.3 + 0.2 * i for i in range(len(pieces))],
        },
        "pause_id": pause_id,
        "latency_ms": None,
    }


def new_session(owner, status: str, pieces: list[str], **fields) -> ReviewSession:
    return ReviewSession.objects.create(
        owner=owner,
        domain=ward_domain(),
        input_text=CASE,
        prompt_ids=prompt()[0],
        model_name="smollm2-135m-instruct",
        status=status,
        text="".join(pieces),
        generated_ids=[100 + i for i in range(len(pieces))],
        seed=3,
        max_new_tokens=len(pieces),
        decoding={"temperature": 0.7, "top_p": 0.9},
        task_type="open",
        task_source="classifier",
        **fields,
    )


def paused_session(owner, pieces: list[str] = WORDS) -> ReviewSession:
    """Paused by the "Unsure" policy after the last piece, with alternatives and attention."""
    session = new_session(owner, ReviewSession.PAUSED, pieces)
    store(session, "status", {"status": "running"})
    tokens(session, pieces)
    pause = PauseEvent.objects.create(
        session=session,
        position=len(pieces),
        trigger="Unsure",
        kind="low_confidence",
        reason="top-1 probability 0.24 < 0.35",
        evidence=EVIDENCE,
        alternatives=ALTERNATIVES,
        halted_at=timezone.now(),
    )
    audit.append("start", owner.username, session, {"domain": session.domain.name})
    audit.append(
        "paused",
        "engine",
        session,
        {"trigger": "Unsure", "reason": pause.reason, "position": pause.position},
    )
    store(session, "status", {"status": "paused"})
    store(session, "pause", pause_payload(pause.pk, pieces))
    pause_details(session, pause, pieces)
    session.refresh_from_db()
    return session


SNAPSHOT_BYTES = 9 * 1024 * 1024


def pause_details(session: ReviewSession, pause: PauseEvent, pieces: list[str]) -> None:
    """What the worker reads of the frozen state after the pause: its attention and snapshot."""
    of = {"pause_id": pause.pk, "edit": None, "position": len(pieces)}
    pause.attention = pause_attention(pieces)
    pause.save(update_fields=["attention"])
    store(session, "pause_attention", {**of, "attention": pause.attention})
    store(session, "snapshot", {**of, "bytes": SNAPSHOT_BYTES, "ms": 41.0})


def generated_session(
    owner, reason: str = "max_tokens", pieces: list[str] = WORDS
) -> ReviewSession:
    """The model has finished (at the token limit by default); the decision is still open."""
    session = new_session(owner, ReviewSession.GENERATED, pieces)
    store(session, "status", {"status": "running"})
    tokens(session, pieces)
    audit.append("start", owner.username, session, {"domain": session.domain.name})
    audit.append("generated", "engine", session, {"reason": reason, "tokens": len(pieces)})
    store(session, "finish", {"reason": reason, "text": "".join(pieces)})
    store(session, "status", {"status": "generated"})
    session.refresh_from_db()
    return session
