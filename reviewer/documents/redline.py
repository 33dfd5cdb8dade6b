"""The reviewed text as a redline: what each reviewer's edit inserted and deleted, character
by character, with its author, what it replaced with what, the pause that led to it (numbered
within the session: 1, 2, ... in the order they happened), and the decision that closed it.

Built from the session's text and its applied edits, oldest first. Each edit is reduced to
the characters that really changed (the common start and end of the old and new span are
left out); later edits move the earlier changes after them. A change the model's own
rollbacks have since cut away is left out.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models.fields.json import KT
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from reviewer import events
from reviewer.analytics.timeline import AUDIT_ACTIONS, actor_name, last_decision, policy_names
from reviewer.lifecycle import record
from reviewer.models import Edit, PauseEvent, ReviewSession, SessionEvent
from reviewer.web.ui_text import decided_text, session_error, status_labels


@dataclass
class Change:
    number: int  # 1, 2, ... in the order the edits were made
    start: int  # where the inserted text starts in the session's text (characters)
    inserted: str
    deleted: str
    edit: Edit
    pause_number: int | None = None  # the edit's pause, counted within the session

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
            "text_before": self.edit.text_before,
            "text_after": self.edit.text_after,
            "pause": pause_label(self.edit.pause, self.pause_number),
            "pause_number": self.pause_number,
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
    edits = session.edits.filter(applied=True).select_related("author", "pause")
    starts = _char_starts(session)
    cuts = rollback_cuts(session)
    numbers = pause_numbers(session)
    for number, edit in enumerate(edits.order_by("created_at", "id"), 1):
        start, seq = starts.get(edit.pk, (edit.start or 0, None))
        found = _cut(found, [char for at, char in cuts if seq is not None and at < seq])
        cuts = [(at, char) for at, char in cuts if seq is None or at > seq]
        change = _change_of(number, edit, start)
        if change is not None:
            change.pause_number = numbers.get(edit.pause_id) if edit.pause_id else None
            found = _moved(found, change) + [change]
    found = _cut(found, [char for _, char in cuts])
    text = session.text
    kept = [c for c in found if c.end <= len(text) and text[c.start : c.end] == c.inserted]
    return sorted(kept, key=lambda c: (c.start, c.number))


def _cut(found: list[Change], cuts: list[int]) -> list[Change]:
    """The changes a rollback to each character in ``cuts`` left standing: a deletion after
    the cut (no text of its own to compare) is gone with what the model wrote around it."""
    for cut in cuts:
        found = [c for c in found if c.end <= cut]
    return found


def rollback_cuts(session: ReviewSession) -> list[tuple[int, int]]:
    """(seq, character) of each automatic rollback: where the text it took back began, found
    by folding the log up to it (token events read without their attention rows)."""
    kinds = (events.ROLLBACK, events.EDITED, events.TRUNCATED, events.FINISH)
    others = SessionEvent.objects.filter(session=session, type__in=kinds)
    if not others.filter(type=events.ROLLBACK).exists():
        return []
    rows = [
        (seq, kind, payload) for seq, kind, payload in others.values_list("seq", "type", "payload")
    ]
    tokens = SessionEvent.objects.filter(session=session, type=events.TOKEN).annotate(
        position=KT("payload__position"), token_id=KT("payload__token_id"), text=KT("payload__text")
    )
    for seq, position, token_id, text in tokens.values_list("seq", "position", "token_id", "text"):
        rows.append((seq, events.TOKEN, {"position": position, "token_id": token_id, "text": text}))
    folded: list[record.Token] = []
    cuts = []
    for seq, kind, payload in sorted(rows, key=lambda row: row[0]):
        if kind == events.ROLLBACK:
            cuts.append((seq, len(record.text_of(folded[: int(payload["removed_from"])]))))
        record.apply(folded, kind, payload)
    return cuts


def _change_of(number: int, edit: Edit, start: int) -> Change | None:
    offset, deleted, inserted = char_diff(edit.text_before, edit.text_after)
    if not deleted and not inserted:
        return None
    return Change(number, start + offset, inserted, deleted, edit)


def _char_starts(session: ReviewSession) -> dict[int, tuple[int, int]]:
    """Where each applied edit's text starts, in characters, as its event reported it (a
    choose or a rollback names a token position, not a character), and the event's seq."""
    rows = SessionEvent.objects.filter(session=session, type__in=(events.EDITED, events.TRUNCATED))
    return {
        row.payload["edit"]: (int(row.payload.get("char_start", 0)), row.seq)
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
        # An insertion at the very point of an earlier deletion goes after it; an earlier
        # insertion there moves along with the text after it.
        at_deletion = change.start == cut_from and not new.deleted and not change.inserted
        if change.start >= cut_to and not at_deletion:
            change.start += shift
        elif change.end > cut_from:
            continue  # rewritten by the newer edit, which records the text it replaced
        kept.append(change)
    return kept


def reason(edit: Edit) -> str:
    """What the edit did, naming the very text it replaced and what replaced it (a glossary
    term's own wording may differ from the text the reviewer selected), and why."""
    if edit.kind == "truncate":
        return _("Rolled back")  # the text cut away is struck through where it stood
    change = replacement(edit.text_before, edit.text_after)
    if edit.glossary_code is not None:  # the code the term had then, kept with the edit
        code = f" [{edit.glossary_code}]" if edit.glossary_code else ""
        return _("%(change)s (glossary term%(code)s)") % {"change": change, "code": code}
    if edit.kind == "choose":
        return _("%(change)s (alternative chosen at the pause)") % {"change": change}
    return change


def replacement(before: str, after: str) -> str:
    """ "Replaced “high blood pressure” with “hypertension”" (the spaces around each left
    out, unless a text is nothing else)."""
    before, after = before.strip() or before, after.strip() or after
    if not before:
        return _("Inserted “%(text)s”") % {"text": after}
    if not after:
        return _("Deleted “%(text)s”") % {"text": before}
    return _("Replaced “%(before)s” with “%(after)s”") % {"before": before, "after": after}


def pause_numbers(session: ReviewSession) -> dict[int, int]:
    """Each of the session's pauses by id: its number in the session, 1, 2, ... in the order
    the pauses happened (a database id counts every session's pauses)."""
    pauses = PauseEvent.objects.filter(session=session).order_by("halted_at", "id")
    return {pk: number for number, pk in enumerate(pauses.values_list("pk", flat=True), 1)}


def pause_label(pause: PauseEvent | None, number: int | None = None) -> str:
    if pause is None:
        return ""
    if number is None:
        number = pause_numbers(pause.session).get(pause.pk, 0)
    if pause.trigger == "manual":
        trigger = _("manual pause")
    else:  # a policy by the name the session page gives it (its Chinese one on a Chinese page)
        trigger = policy_names(pause.session.domain).get(pause.trigger, pause.trigger)
    return _("Pause %(number)s (%(trigger)s) after %(count)s tokens") % {
        "number": number,
        "trigger": trigger,
        "count": pause.position,
    }


def decision(session: ReviewSession) -> dict[str, Any]:
    """How the session was decided: approved, rejected or cancelled, by whom, when, with the
    comment; or, for an undecided or failed session, its status. ``text`` is the line the
    documents show."""
    record = last_decision(session) if session.is_final else None
    status = status_labels().get(session.status, session.status)
    told: dict[str, Any] = {"status": session.status, "action": None, "actor": None}
    if record is None:
        told |= {"time": None, "comment": ""}
        if session.is_final:  # failed, or closed with no decision on record
            told["text"] = decided_text(status, session_error(session) or session.decision_comment)
        else:
            told["text"] = _("Not decided yet (%(status)s)") % {"status": status}
        return told
    when = timezone.localtime(record.created_at)
    told |= {
        "action": record.action,
        "actor": record.actor,  # as the audit chain names them
        "time": when.isoformat(),
        "comment": str(record.payload.get("comment") or session.decision_comment or ""),
        "text": _("%(decision)s by %(actor)s, %(time)s")
        % {
            "decision": AUDIT_ACTIONS.get(record.action, record.action),
            "actor": actor_name(record.actor),
            "time": when.strftime("%Y-%m-%d %H:%M %Z"),
        },
    }
    return told


def comment_line(comment: str) -> str:
    return (_("%(label)s: ") % {"label": _("Comment")}) + comment


def language() -> str:
    """The page's language, as the site's pages name it in their ``lang``."""
    return translation.get_language() or settings.LANGUAGE_CODE


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
        "decision": decision(session),
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
        f'<li value="{c.number}">'  # the number beside its marks in the text
        + html.escape(
            f"{c.edit.author.username} · {reason(c.edit)}"
            + (f" · {pause_label(c.edit.pause, c.pause_number)}" if c.edit.pause else "")
        )
        + "</li>"
        for c in sorted(found, key=lambda c: c.number)
    )
    decided = decision(session)
    verdict = f"<p>{html.escape(decided['text'])}</p>"
    if decided["comment"]:
        verdict += f"<p>{html.escape(comment_line(decided['comment']))}</p>"
    title = html.escape(_("Session %(id)s: reviewed text") % {"id": session.pk})
    return (
        f'<!doctype html><html lang="{html.escape(language())}"><head><meta charset="utf-8">'
        f"<title>{title}</title>"
        "<style>body{font:16px/1.6 sans-serif;max-width:50rem;margin:2rem auto}"
        "ins{background:#d9f2e3;text-decoration:underline}del{background:#fbe3e4;color:#8a1c22}"
        f"</style></head><body><h1>{title}</h1><p>{''.join(body)}</p>"
        f"<h2>{html.escape(_('Changes'))}</h2><ol>{rows}</ol>"
        f"<h2>{html.escape(_('Decision'))}</h2>{verdict}</body></html>"
    )
