"""The reviewed text as a redline: what each reviewer's edit inserted and deleted, character
by character, with its author, its reason and the pause that led to it.

Built from the session's text and its applied edits, oldest first. Each edit is reduced to
the characters that really changed (the common start and end of the old and new span are
left out); later edits move the earlier changes after them. A change the model's own
rollbacks have since cut away is left out.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext as _

from reviewer import events
from reviewer.models import Edit, PauseEvent, ReviewSession, SessionEvent


@dataclass
class Change:
    number: int  # 1, 2, ... in the order the edits were made
    start: int  # where the inserted text starts in the session's text (characters)
    inserted: str
    deleted: str
    edit: Edit

    @property
    def end(self) -> int:
        return self.start + len(self.inserted)

    def as_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "start": self.start,
            "end": self.end,
            "inserted": self.inserted,
            "deleted": self.deleted,
            "edit": self.edit.pk,
            "kind": self.edit.kind,
            "author": self.edit.author.username,
            "reason": reason(self.edit),
            "pause": pause_label(self.edit.pause),
            "time": self.edit.created_at.isoformat(),
        }


def char_diff(before: str, after: str) -> tuple[int, str, str]:
    """(offset, deleted, inserted): the span that differs, without the common ends."""
    prefix = 0
    while prefix < min(len(before), len(after)) and before[prefix] == after[prefix]:
        prefix += 1
    suffix = 0
    while (
        suffix < min(len(before), len(after)) - prefix
        and before[len(before) - 1 - suffix] == after[len(after) - 1 - suffix]
    ):
        suffix += 1
    return prefix, before[prefix : len(before) - suffix], after[prefix : len(after) - suffix]


def changes(session: ReviewSession) -> list[Change]:
    found: list[Change] = []
    edits = session.edits.filter(applied=True).select_related("author", "pause", "glossary_term")
    starts = _char_starts(session)
    for number, edit in enumerate(edits.order_by("created_at", "id"), 1):
        change = _change_of(number, edit, starts.get(edit.pk, edit.start or 0))
        if change is not None:
            found = _moved(found, change) + [change]
    text = session.text
    kept = [c for c in found if c.end <= len(text) and text[c.start : c.end] == c.inserted]
    return sorted(kept, key=lambda c: (c.start, c.number))


def _change_of(number: int, edit: Edit, start: int) -> Change | None:
    offset, deleted, inserted = char_diff(edit.text_before, edit.text_after)
    if not deleted and not inserted:
        return None
    return Change(number, start + offset, inserted, deleted, edit)


def _char_starts(session: ReviewSession) -> dict[int, int]:
    """Where each applied edit's text starts, in characters, as its event reported it (a
    choose or a rollback names a token position, not a character)."""
    rows = SessionEvent.objects.filter(session=session, type__in=(events.EDITED, events.TRUNCATED))
    return {
        row.payload["edit"]: int(row.payload.get("char_start", 0))
        for row in rows
        if isinstance(row.payload.get("edit"), int)
    }


def _moved(earlier: list[Change], new: Change) -> list[Change]:
    """The earlier changes as they sit after ``new``: later ones shift, covered ones go."""
    cut_from, cut_to = new.start, new.start + len(new.deleted)
    shift = len(new.inserted) - len(new.deleted)
    kept = []
    for change in earlier:
        if new.edit.kind == "truncate" and change.end > cut_from:
            continue
        if change.start >= cut_to and not (change.start == cut_from and not new.deleted):
            change.start += shift
        elif change.end > cut_from:
            continue  # rewritten by the newer edit, which records the text it replaced
        kept.append(change)
    return kept


def reason(edit: Edit) -> str:
    if edit.glossary_term is not None:
        term = edit.glossary_term
        code = f" [{term.code}]" if term.code else ""
        return _("Glossary term: “%(term)s” → “%(preferred)s”%(code)s") % {
            "term": term.term,
            "preferred": term.preferred,
            "code": code,
        }
    if edit.kind == "choose":
        return _("Alternative chosen at the pause")
    if edit.kind == "truncate":
        return _("Rolled back")
    return _("Rewritten by the reviewer")


def pause_label(pause: PauseEvent | None) -> str:
    if pause is None:
        return ""
    trigger = _("manual pause") if pause.trigger == "manual" else pause.trigger
    return _("Pause #%(id)s (%(trigger)s) after %(count)s tokens") % {
        "id": pause.pk,
        "trigger": trigger,
        "count": pause.position,
    }


def segments(text: str, found: list[Change]) -> list[tuple[str, str, Change | None]]:
    """(kind, text, change) in reading order: "text", then each change's "del" and "ins"."""
    out: list[tuple[str, str, Change | None]] = []
    at = 0
    for change in found:
        if change.start < at:
            continue  # overlapping leftovers of an odd history: shown as plain text
        if change.start > at:
            out.append(("text", text[at : change.start], None))
        if change.deleted:
            out.append(("del", change.deleted, change))
        if change.inserted:
            out.append(("ins", change.inserted, change))
        at = change.end
    if at < len(text):
        out.append(("text", text[at:], None))
    return out


def as_json(session: ReviewSession) -> dict[str, Any]:
    found = changes(session)
    return {
        "session": session.pk,
        "text": session.text,
        "changes": [c.as_dict() for c in found],
        "segments": [
            {"kind": kind, "text": text, "change": c.number if c else None}
            for kind, text, c in segments(session.text, found)
        ],
    }


def as_html(session: ReviewSession) -> str:
    found = changes(session)
    body = []
    for kind, text, change in segments(session.text, found):
        escaped = html.escape(text).replace("\n", "<br>")
        if change is None:
            body.append(escaped)
            continue
        title = html.escape(f"{change.edit.author.username}: {reason(change.edit)}")
        body.append(f'<{kind} title="{title}">{escaped}</{kind}><sup>{change.number}</sup>')
    rows = "".join(
        "<li>"
        + html.escape(
            f"{c.edit.author.username} · {reason(c.edit)}"
            + (f" · {pause_label(c.edit.pause)}" if c.edit.pause else "")
        )
        + "</li>"
        for c in sorted(found, key=lambda c: c.number)
    )
    title = html.escape(_("Session %(id)s: reviewed text") % {"id": session.pk})
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>'
        "<style>body{font:16px/1.6 sans-serif;max-width:50rem;margin:2rem auto}"
        "ins{background:#d9f2e3;text-decoration:underline}del{background:#fbe3e4;color:#8a1c22}"
        f"</style></head><body><h1>{title}</h1><p>{''.join(body)}</p>"
        f"<h2>{html.escape(_('Changes'))}</h2><ol>{rows}</ol></body></html>"
    )
