"""The redline as a Word document: each change a tracked insertion (w:ins) or deletion
(w:del) in the reviewer's name, so Word shows and accepts them as its own, followed by a
numbered list of the changes (what each replaced with what, and the pause behind it) and the
decision that closed the session."""

from __future__ import annotations

import io
import itertools
import re

from django.utils.translation import gettext as _
from docx import Document
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.text.paragraph import Paragraph

from reviewer.documents import redline
from reviewer.models import ReviewSession

# What XML 1.0 cannot hold (control characters other than tab, newline and return; lone
# surrogates; U+FFFE and U+FFFF). A model's token or a comment may carry one; Word's file
# shows U+FFFD in its place rather than the document failing for good.
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    return NOT_XML.sub("\ufffd", text)


def as_docx(session: ReviewSession) -> bytes:
    found = redline.changes(session)
    document = Document()
    document.core_properties.title = _("Session %(id)s: reviewed text") % {"id": session.pk}
    document.core_properties.language = redline.language()
    document.add_heading(document.core_properties.title, level=1)
    ids = itertools.count(1)
    paragraph = document.add_paragraph()
    for kind, text, change in redline.segments(session.text, found):
        for n, line in enumerate(text.split("\n")):
            if n:
                paragraph = document.add_paragraph()
            if line:
                _add(paragraph, kind, line, change, next(ids))
    document.add_heading(_("Changes"), level=2)
    for change in sorted(found, key=lambda c: c.number):
        details = [change.edit.author.username, redline.reason(change.edit)]
        if change.edit.pause is not None:
            details.append(redline.pause_label(change.edit.pause, change.pause_number))
        document.add_paragraph(xml_text(f"{change.number}. " + " · ".join(details)))
    document.add_heading(_("Decision"), level=2)
    decided = redline.decision(session)
    document.add_paragraph(xml_text(decided["text"]))
    if decided["comment"]:
        document.add_paragraph(xml_text(redline.comment_line(decided["comment"])))
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _add(
    paragraph: Paragraph, kind: str, text: str, change: redline.Change | None, number: int
) -> None:
    run = paragraph.add_run(xml_text(text))
    if change is None:
        return
    if kind == "del":  # deleted text lives in w:delText, not w:t
        for element in run._r.findall(qn("w:t")):
            element.tag = qn("w:delText")
    mark = OxmlElement("w:ins" if kind == "ins" else "w:del")
    mark.set(qn("w:id"), str(number))
    mark.set(qn("w:author"), change.edit.author.username)
    mark.set(qn("w:date"), change.edit.created_at.strftime("%Y-%m-%dT%H:%M:%SZ"))
    run._r.addprevious(mark)
    mark.append(run._r)
