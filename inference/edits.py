"""Edits at a pause: replace a span, choose an alternative token, truncate, append.

Every edit is planned and validated first (``plan``: EditError, state untouched), then
applied as one splice (``apply``): generated ids are kept up to the first changed token and
the new tail is prefilled, so only the KV from the edit point on is recomputed. A rollback
is a splice with no tail (``truncate_to``). The engine calls these; they never call it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from inference.message import Message
from inference.signals import top1_and_entropy
from inference.state import Note
from inference.text import Tokenizer

if TYPE_CHECKING:
    from inference.state import DecodeState
    from inference.transformers_backend.runner import ModelRunner, StepOutput

Description = dict[str, Any]  # one edit: kind, char span, text before and after
Parts = tuple[int, list[int], list[Description]]  # (ids kept, new tail, descriptions)


class EditError(ValueError):
    """An edit is out of range, overlaps another or is malformed; nothing was changed. Its
    argument is a Message, so that a reviewer reads it in their own language."""


@dataclass(frozen=True)
class Replace:
    start: int
    end: int
    text: str
    unit: str = "char"  # "char": offsets into the generated text; "token": generated indices
    kind: ClassVar[str] = "replace"


@dataclass(frozen=True)
class Choose:
    token_id: int
    position: int | None = None  # default: the next token
    kind: ClassVar[str] = "choose"


@dataclass(frozen=True)
class Truncate:
    position: int  # keep generated ids[:position]
    kind: ClassVar[str] = "truncate"


@dataclass(frozen=True)
class Append:
    text: str
    kind: ClassVar[str] = "append"


Edit = Replace | Choose | Truncate | Append
EDIT_KINDS: dict[str, type[Edit]] = {cls.kind: cls for cls in (Replace, Choose, Truncate, Append)}


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def from_dict(d: dict[str, Any]) -> Edit:
    d = dict(d)
    cls = EDIT_KINDS.get(d.pop("kind", None))
    if cls is None:
        raise EditError(Message("edit kind must be one of %(kinds)s", kinds=", ".join(EDIT_KINDS)))
    try:
        return cls(**d)
    except TypeError as exc:
        raise EditError(
            Message("bad %(kind)s edit: %(error)s", kind=cls.kind, error=str(exc))
        ) from None


@dataclass(frozen=True)
class Vocabulary:
    """What planning an edit needs to know about the model's tokens."""

    tokenizer: Tokenizer
    token_text: Callable[[int], str]  # one token id -> its text
    vocab_size: int
    eos_ids: frozenset[int]


@dataclass(frozen=True)
class Plan:
    """An edit, validated and turned into token ids: keep generated ids[:keep], then ``tail``."""

    keep: int
    tail: list[int]
    descriptions: list[Description]

    def results(self, old_length: int) -> list[EditResult]:
        """What each edit did, once the splice has been applied to ``old_length`` tokens."""
        done = dict(
            token_start=self.keep, token_end=old_length, new_token_end=self.keep + len(self.tail)
        )
        return [EditResult(**{**d, **done}) for d in self.descriptions]


def plan(vocab: Vocabulary, state: DecodeState, edits: Sequence[Edit | dict[str, Any]]) -> Plan:
    """Validate edits (Edit objects or dicts) against a paused state; EditError if any is
    invalid. Reads the state, never changes it."""
    return Plan(*_plan(vocab, state, [from_dict(e) if isinstance(e, dict) else e for e in edits]))


def _plan(vocab: Vocabulary, state: DecodeState, edits: list[Edit]) -> Parts:
    """(tokens to keep, new tail ids, per-edit descriptions) or EditError."""
    if not edits:
        raise EditError(Message("no edit given"))
    kinds = {e.kind for e in edits}
    if len(edits) > 1 and not kinds <= {"replace", "append"}:
        raise EditError(Message("truncate and choose edits must be applied alone"))
    if isinstance(edits[0], Truncate):
        return _truncate(state, edits[0])
    if isinstance(edits[0], Choose):
        return _choose(vocab, state, edits[0])
    rewrites = [e for e in edits if isinstance(e, Replace | Append)]
    units = {e.unit for e in rewrites if isinstance(e, Replace)}
    if not units <= {"char", "token"}:
        raise EditError(Message('edit unit must be "char" or "token"'))
    if "token" in units:
        if units != {"token"} or "append" in kinds:
            raise EditError(Message("token-range replacements cannot be mixed with other edits"))
        return _replace_tokens(vocab, state, [e for e in rewrites if isinstance(e, Replace)])
    return _rewrite(vocab, state, rewrites)


def _replace_tokens(vocab: Vocabulary, state: DecodeState, edits: list[Replace]) -> Parts:
    """Token ranges swapped for the tokens of new text; the tokens after them are kept."""
    ids, n = state.generated_ids, len(state.generated_ids)
    for e in edits:
        template = "token range [%(start)s, %(end)s) is outside [0, %(size)s]"
        _check_range(e.start, e.end, n, template)
    edits = sorted(edits, key=lambda e: (e.start, e.end))
    for a, b in zip(edits, edits[1:], strict=False):
        if b.start < a.end or a.start == b.start:
            template = "edits overlap: tokens [%(a)s, %(b)s) and [%(c)s, %(d)s)"
            raise EditError(Message(template, a=a.start, b=a.end, c=b.start, d=b.end))
    new_ids: list[int] = []
    results: list[Description] = []
    cursor = 0
    for e in edits:
        new_ids += ids[cursor : e.start] + encode_plain(vocab, e.text)
        before = vocab.tokenizer.decode(ids[e.start : e.end], skip_special_tokens=True)
        chars = state.detok.token_span_chars(e.start, e.end)
        results.append(_result("replace", *chars, before, e.text))
        cursor = e.end
    new_ids += ids[cursor:]
    keep = edits[0].start
    return keep, new_ids[keep:], results


def _truncate(state: DecodeState, edit: Truncate) -> Parts:
    n = len(state.generated_ids)
    _check_int(edit.position, 0, n, "truncate position %(value)s is outside [%(lo)s, %(hi)s]")
    start, _ = state.detok.token_span_chars(edit.position, n)
    removed = state.text[start:]
    return edit.position, [], [_result("truncate", start, len(state.text), removed, "")]


def _choose(vocab: Vocabulary, state: DecodeState, edit: Choose) -> Parts:
    n = len(state.generated_ids)
    ended = n > 0 and state.generated_ids[-1] in vocab.eos_ids
    # The next token of a text that ended takes the end's place, as an append does: an EOS
    # left inside the context would end nothing and read as text the reviewer never saw.
    position = (n - 1 if ended else n) if edit.position is None else edit.position
    _check_int(position, 0, n, "choose position %(value)s is outside [%(lo)s, %(hi)s]")
    template = "token id %(value)s is outside [%(lo)s, %(hi)s]"
    _check_int(edit.token_id, 0, vocab.vocab_size - 1, template)
    start, end = state.detok.token_span_chars(position, n)
    text = vocab.token_text(edit.token_id)
    return position, [edit.token_id], [_result("choose", start, end, state.text[start:end], text)]


def _rewrite(vocab: Vocabulary, state: DecodeState, edits: list[Replace | Append]) -> Parts:
    """Character-range replaces and appends, composed into one new text."""
    text = state.text
    spans = sorted((_char_span(state, e), i) for i, e in enumerate(edits) if isinstance(e, Replace))
    for ((a0, a1), _), ((b0, b1), _) in zip(spans, spans[1:], strict=False):
        if b0 < a1 or (a0 == b0):
            template = "edits overlap: chars [%(a)s, %(b)s) and [%(c)s, %(d)s)"
            raise EditError(Message(template, a=a0, b=a1, c=b0, d=b1))
    appends = [e.text for e in edits if isinstance(e, Append)]
    appended = "".join(appends)
    if appends and not appended:
        raise EditError(Message("append needs some text"))
    pieces: list[str] = []
    results: list[Description] = []
    cursor = 0
    for (start, end), i in spans:
        pieces += [text[cursor:start], edits[i].text]
        results.append(_result("replace", start, end, text[start:end], edits[i].text))
        cursor = end
    new_text = "".join(pieces) + text[cursor:] + appended
    if appended:
        results.append(_result("append", len(text), len(text), "", appended))
    first_char = spans[0][0][0] if spans else len(text)
    keep, cut_char = _cut(state, first_char, vocab.eos_ids)
    tail = encode_plain(vocab, new_text[cut_char:])
    return keep, list(tail), results


def _cut(state: DecodeState, char: int, eos_ids: frozenset[int]) -> tuple[int, int]:
    if char >= len(state.text):  # at the end: keep every token that made text (a final EOS
        # goes; so do the bytes of a character not yet complete, which the reader never saw)
        keep = state.detok.emitted
        if keep and state.generated_ids[keep - 1] in eos_ids:
            keep -= 1
        return keep, len(state.text)
    return state.detok.cut_for_char(char)


def _char_span(state: DecodeState, edit: Replace) -> tuple[int, int]:
    if edit.unit != "char":
        template = 'edit unit must be "char" or "token", not "%(unit)s"'
        raise EditError(Message(template, unit=str(edit.unit)))
    template = "char range [%(start)s, %(end)s) is outside [0, %(size)s]"
    _check_range(edit.start, edit.end, len(state.text), template)
    return edit.start, edit.end


def _check_range(start: object, end: object, size: int, template: str) -> None:
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= size):
        raise EditError(Message(template, start=shown(start), end=shown(end), size=size))


def _check_int(value: object, lo: int, hi: int, template: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise EditError(Message(template, value=shown(value), lo=lo, hi=hi))


def shown(value: object) -> int | str:
    """A value as a refusal names it: a number as is, anything else as Python writes it."""
    return value if isinstance(value, int) and not isinstance(value, bool) else repr(value)


def _result(kind: str, char_start: int, char_end: int, before: str, after: str) -> Description:
    return dict(
        kind=kind, char_start=char_start, char_end=char_end, text_before=before, text_after=after
    )


def encode_plain(vocab: Vocabulary, text: str) -> list[int]:
    """A reviewer's text as plain text: typing "<|im_end|>" must not end the generation."""
    return vocab.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)


# ---- applying: one splice ---------------------------------------------------------------
def apply(
    runner: ModelRunner, vocab: Vocabulary, state: DecodeState, plan: Plan
) -> list[EditResult]:
    """Apply a validated plan to the state; what each edit did."""
    old_length = len(state.generated_ids)
    splice(runner, vocab, state, plan.keep, plan.tail)
    return plan.results(old_length)


def truncate_to(runner: ModelRunner, vocab: Vocabulary, state: DecodeState, keep: int) -> None:
    """Keep generated ids[:keep]; recompute only the last kept token's step."""
    splice(runner, vocab, state, keep, [])


def splice(
    runner: ModelRunner, vocab: Vocabulary, state: DecodeState, keep: int, tail: list[int]
) -> None:
    """Replace generated ids[keep:] with ``tail``; only the KV from the edit point on is
    recomputed. The distribution that draws tail[0] does not depend on the token that
    stood there, so the tail runs right after the kept tokens; a truncation re-runs
    the last kept token for its next-token logits. A pending last token is only run when
    the splice keeps it."""
    if keep == len(state.generated_ids):
        state.settle(runner)  # the cache must cover every kept token
    state.pending = None  # a pending token past ``keep`` is dropped with the rest
    first = _stats_before(state, keep) if tail else None
    state.notes = [note for note in state.notes if note.at <= keep]  # later ones go with the text
    end = state.kv_index(keep)  # context kept: prompt, kept tokens and their notes
    if tail:
        start, run_ids = end, tail
    else:  # the last kept context token again, for its next-token logits
        start, run_ids = end - 1, [state.context_ids()[end - 1]]
    runner.crop(state.cache, start)
    hidden = state.prompt_hidden is not None
    out = runner.forward(run_ids, state.cache, keep=len(run_ids), hidden=hidden)
    state.detok.truncate(keep)
    state.detok.extend(vocab.tokenizer, tail)
    state.truncate_histories(keep)
    state.policies.truncate(keep)
    if first is not None:
        _extend_histories(state, first, out)
    state.next_logits = out.logits[-1]
    mark_edited(state, keep, tail)


def mark_edited(state: DecodeState, keep: int, tail: list[int]) -> None:
    """After a splice: the next distribution is new (before_token policies have not weighed
    it), and the tokens a reviewer wrote are theirs: no automatic rollback removes them."""
    state.skip_before_at = None
    state.edited_upto = keep + len(tail) if tail else min(state.edited_upto, keep)


def _extend_histories(state: DecodeState, first: tuple[float, float], out: StepOutput) -> None:
    """The tail's histories: its first token's from the distribution that drew it, the
    others' from the tail's own forward (logits [T, V], hidden [T, H])."""
    top1, entropy = top1_and_entropy(out.logits[:-1])
    state.top1_history += [first[0], *top1]
    state.entropy_history += [first[1], *entropy]
    for i in range(len(out.logits)):
        hidden = out.hidden[i] if out.hidden is not None else None
        state.similarity_history.append(state.similarity(hidden))


def _stats_before(state: DecodeState, index: int) -> tuple[float, float]:
    """(top1 prob, entropy) of the distribution that draws generated token ``index``."""
    if index < len(state.top1_history):
        return state.top1_history[index], state.entropy_history[index]
    top1, entropy = top1_and_entropy(state.next_logits[None])
    return top1[0], entropy[0]


def add_note(runner: ModelRunner, vocab: Vocabulary, state: DecodeState, text: str) -> Note:
    """Run ``text`` into the KV cache after what the model wrote, outside the generated ids
    (see ``Engine.add_note``); the state must be settled."""
    ids = encode_plain(vocab, text)
    if not ids:
        raise ValueError("a note needs some text")
    out = runner.forward(ids, state.cache, hidden=state.prompt_hidden is not None)
    state.next_logits = out.logits[-1]
    # As after an edit: a new next distribution, and a rollback would drop the note with
    # the text it follows.
    state.skip_before_at = None
    state.edited_upto = len(state.generated_ids)
    note = Note(len(state.generated_ids), ids, text)
    state.notes.append(note)
    return note


class EditShortcuts:
    """One method per edit kind, over a backend's ``edit`` (all or nothing, at a pause)."""

    def edit(self, state: DecodeState, *edits: Edit | dict[str, Any]) -> list[EditResult]:
        raise NotImplementedError

    def replace_text(self, state: DecodeState, start: int, end: int, text: str) -> EditResult:
        return self.edit(state, Replace(start, end, text))[0]

    def replace_tokens(self, state: DecodeState, start: int, end: int, text: str) -> EditResult:
        return self.edit(state, Replace(start, end, text, unit="token"))[0]

    def choose_alternative(
        self, state: DecodeState, token_id: int, position: int | None = None
    ) -> EditResult:
        return self.edit(state, Choose(token_id, position))[0]

    def truncate(self, state: DecodeState, position: int) -> EditResult:
        return self.edit(state, Truncate(position))[0]

    def append_text(self, state: DecodeState, text: str) -> EditResult:
        return self.edit(state, Append(text))[0]
