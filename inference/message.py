"""Message: English text that keeps its template and values, so that the web layer can show it
in the reader's language (the template is a catalog's msgid; the same values fill the
translation) while inference/ knows no catalog. A value may be a Message in turn."""

from __future__ import annotations

from typing import Any


class Message(str):
    """``template % values``, in English; ``template`` and ``values`` stay readable."""

    template: str
    values: dict[str, Any]

    def __new__(cls, template: str, **values: Any) -> Message:
        message = super().__new__(cls, template % values)
        message.template, message.values = template, values
        return message

    def __getnewargs_ex__(self) -> tuple[tuple[str], dict[str, Any]]:
        return (self.template,), self.values  # pickled as made, not from the English text


def either(choices: list[str]) -> str:
    """'"a"', '"a" or "b"', '"a", "b" or "c"': quoted choices, the last joined by "or"."""
    quoted = [f'"{choice}"' for choice in choices]
    if len(quoted) == 1:
        return quoted[0]
    return Message("%(some)s or %(last)s", some=", ".join(quoted[:-1]), last=quoted[-1])
