"""Edits at a pause: replace a span, choose an alternative token, truncate, append.

Every edit is planned and validated first (EditError, state untouched), then applied as
one splice: generated ids are kept up to the first changed token and the new tail is
tokenized and prefilled, so only the KV from the edit point on is recomputed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any


class EditError(ValueError):
    """An edit is out of range, overlaps another or is malformed; nothing was changed."""


@dataclass(frozen=True)
class Replace:
    start: int
    end: int
    text: str
    unit: str = "char"  # "char": offsets into the generated text; "token": generated indices
    kind = "replace"


@dataclass(frozen=True)
class Choose:
    token_id: int
    position: int | None = None  # default: the next token
    kind = "choose"


@dataclass(frozen=True)
class Truncate:
    position: int  # keep generated ids[:position]
    kind = "truncate"


@dataclass(frozen=True)
class Append:
    text: str
    kind = "append"


EDIT_KINDS = {cls.kind: cls for cls in (Replace, Choose, Truncate, Append)}


@dataclass(frozen=True)
class EditResult:
    kind: str
    token_start: int  # first generated index recomputed
    token_end: int  # one past the last old token removed
    new_token_end: int  # one past the last new token
    char_start: int  # the edit's span in the old text
    char_end: int
    text_before: str
    text_after: str

    def to_dict(self) -> dict:
        return asdict(self)


def from_dict(d: dict):
    d = dict(d)
    cls = EDIT_KINDS.get(d.pop("kind", None))
    if cls is None:
        raise EditError(f"edit kind must be one of {', '.join(EDIT_KINDS)}")
    try:
        return cls(**d)
    except TypeError as exc:
        raise EditError(f"bad {cls.kind} edit: {exc}") from None


@dataclass(frozen=True)
class Vocabulary:
    """What planning an edit needs to know about the model's tokens."""

    tokenizer: Any
    token_text: Callable[[int], str]  # one token id -> its text
    vocab_size: int
    eos_ids: frozenset[int]


@dataclass(frozen=True)
class Plan:
    """An edit, validated and turned into token ids: keep generated ids[:keep], then ``tail``."""

    keep: int
    tail: list[int]
    descriptions: list[dict]  # per edit: kind, char span, text before and after

    def results(self, old_length: int) -> list[EditResult]:
        """What each edit did, once the splice has been applied to ``old_length`` tokens."""
        done = dict(token_start=self.keep, token_end=old_length)
        done["new_token_end"] = self.keep + len(self.tail)
        return [EditResult(**{**d, **done}) for d in self.descriptions]


def plan(vocab: Vocabulary, state, edits: list) -> Plan:
    """Validate edits (Edit objects or dicts) against a paused state; EditError if any is
    invalid. Reads the state, never changes it."""
    edits = [from_dict(e) if isinstance(e, dict) else e for e in edits]
    return Plan(*_plan(vocab, state, edits))


def _plan(vocab: Vocabulary, state, edits: list) -> tuple[int, list[int], list[dict]]:
    """(tokens to keep, new tail ids, per-edit descriptions) or EditError."""
    if not edits:
        raise EditError("no edit given")
    kinds = {e.kind for e in edits}
    if len(edits) > 1 and not kinds <= {"replace", "append"}:
        raise EditError("truncate and choose edits must be applied alone")
    if kinds == {"truncate"}:
        return _truncate(state, edits[0])
    if kinds == {"choose"}:
        return _choose(vocab, state, edits[0])
    units = {e.unit for e in edits if e.kind == "replace"}
    if not units <= {"char", "token"}:
        raise EditError('edit unit must be "char" or "token"')
    if "token" in units:
        if units != {"token"} or "append" in kinds:
            raise EditError("token-range replacements cannot be mixed with other edits")
        return _replace_tokens(vocab, state, edits)
    return _rewrite(vocab, state, edits)


def _replace_tokens(vocab: Vocabulary, state, edits: list) -> tuple[int, list[int], list[dict]]:
    """Token ranges swapped for the tokens of new text; the tokens after them are kept."""
    ids, n = state.generated_ids, len(state.generated_ids)
    for e in edits:
        _check_range(e.start, e.end, n, "token range")
    edits = sorted(edits, key=lambda e: (e.start, e.end))
    for a, b in zip(edits, edits[1:], strict=False):
        if b.start < a.end or a.start == b.start:
            raise EditError(f"edits overlap: tokens [{a.start}, {a.end}) and [{b.start}, {b.end})")
    new_ids, cursor, results = [], 0, []
    for e in edits:
        new_ids += ids[cursor : e.start] + _encode_plain(vocab, e.text)
        before = vocab.tokenizer.decode(ids[e.start : e.end], skip_special_tokens=True)
        chars = state.detok.token_span_chars(e.start, e.end)
        results.append(_result("replace", *chars, before, e.text))
        cursor = e.end
    new_ids += ids[cursor:]
    keep = edits[0].start
    return keep, new_ids[keep:], results


def _truncate(state, edit: Truncate) -> tuple[int, list[int], list[dict]]:
    n = len(state.generated_ids)
    _check_int(edit.position, 0, n, "truncate position")
    start, _ = state.detok.token_span_chars(edit.position, n)
    removed = state.text[start:]
    return edit.position, [], [_result("truncate", start, len(state.text), removed, "")]


def _choose(vocab: Vocabulary, state, edit: Choose) -> tuple[int, list[int], list[dict]]:
    n = len(state.generated_ids)
    position = n if edit.position is None else edit.position
    _check_int(position, 0, n, "choose position")
    _check_int(edit.token_id, 0, vocab.vocab_size - 1, "token id")
    start, end = state.detok.token_span_chars(position, n)
    text = vocab.token_text(edit.token_id)
    return position, [edit.token_id], [_result("choose", start, end, state.text[start:end], text)]


def _rewrite(vocab: Vocabulary, state, edits: list) -> tuple[int, list[int], list[dict]]:
    """Replaces (char or token ranges) and appends, composed into one new text."""
    text = state.text
    spans = sorted((_char_span(state, e), i) for i, e in enumerate(edits) if e.kind == "replace")
    for ((a0, a1), _), ((b0, b1), _) in zip(spans, spans[1:], strict=False):
        if b0 < a1 or (a0 == b0):
            raise EditError(f"edits overlap: chars [{a0}, {a1}) and [{b0}, {b1})")
    appended = "".join(e.text for e in edits if e.kind == "append")
    if any(e.kind == "append" for e in edits) and not appended:
        raise EditError("append needs some text")
    pieces, cursor, results = [], 0, []
    for (start, end), i in spans:
        pieces += [text[cursor:start], edits[i].text]
        results.append(_result("replace", start, end, text[start:end], edits[i].text))
        cursor = end
    new_text = "".join(pieces) + text[cursor:] + appended
    if appended:
        results.append(_result("append", len(text), len(text), "", appended))
    first_char = spans[0][0][0] if spans else len(text)
    keep, cut_char = _cut(state, first_char, vocab.eos_ids)
    tail = _encode_plain(vocab, new_text[cut_char:])
    return keep, list(tail), results


def _cut(state, char: int, eos_ids) -> tuple[int, int]:
    if char >= len(state.text):  # at the end: keep every token (a final EOS goes)
        keep = len(state.generated_ids)
        if keep and state.generated_ids[-1] in eos_ids:
            keep -= 1
        return keep, len(state.text)
    return state.detok.cut_for_char(char)


def _char_span(state, edit: Replace) -> tuple[int, int]:
    if edit.unit != "char":
        raise EditError(f'edit unit must be "char" or "token", not {edit.unit!r}')
    _check_range(edit.start, edit.end, len(state.text), "char range")
    return edit.start, edit.end


def _check_range(start, end, size: int, what: str) -> None:
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= size):
        raise EditError(f"{what} [{start}, {end}) is outside [0, {size}]")


def _check_int(value, lo: int, hi: int, what: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise EditError(f"{what} {value!r} is outside [{lo}, {hi}]")


def _result(kind, char_start, char_end, before, after) -> dict:
    return dict(
        kind=kind, char_start=char_start, char_end=char_end, text_before=before, text_after=after
    )


def _encode_plain(vocab: Vocabulary, text: str) -> list[int]:
    """A reviewer's text as plain text: typing "<|im_end|>" must not end the generation."""
    return vocab.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)
