"""Where sentences end in generated text that is still growing, English and Chinese.

The rule, chosen so that a sentence counts at one well-defined token however the text was
split into tokens:

- Chinese terminators (。！？) complete a sentence as soon as they appear.
- An English terminator run (`.`, `!`, `?`, `...`, `…`, with closing quotes or brackets
  after it) completes a sentence only once the next character is seen to be whitespace.
  So "3.5", "e.g.," and "example.com" never end one, and a sentence ending the text so far
  is not complete yet.
- Titles and Latin abbreviations ("Dr.", "Mr.", "e.g.", "i.e.", ...) never end a sentence,
  nor does a list number at the start of a line ("1. ").
- Ambiguous stops ("etc.", "vs.", "Inc.", and ellipses) end a sentence only when the next
  non-space character is not lowercase, so completion waits until that character is seen.

Each sentence is reported with `confirmed_at`, the offset of the character that settled it;
the text holds that sentence as complete exactly when `len(text) > confirmed_at`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import regex

from inference.text import stop_string_at

ENGLISH_TERMINATORS = ".!?…"  # complete a sentence once whitespace follows (see above)
CHINESE_TERMINATORS = "。！？"
CLOSERS = "\"')]}»”’」』）"
TITLES = frozenset({"dr", "mr", "mrs", "ms", "prof", "st", "sr", "jr", "rev", "capt", "lt", "sgt"})
LATIN = frozenset({"e.g", "eg", "i.e", "ie", "al", "cf", "viz", "fig", "figs"})
NEVER_FINAL = TITLES | LATIN
AMBIGUOUS = frozenset({"etc", "vs", "approx", "inc", "ltd", "co", "corp", "dept", "misc"})

# Chinese marks one at a time: each is complete on sight, so "？！" must not grow later.
_TERMINATOR_RUN = regex.compile(f"[{regex.escape(ENGLISH_TERMINATORS)}]+|[{CHINESE_TERMINATORS}]")
_WORD_BEFORE = regex.compile(r"[\w.]*$")
_LIST_NUMBER = regex.compile(r"[ \t]*\d{1,3}")
_CJK = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]")


@dataclass(frozen=True)
class Sentence:
    start: int  # first character that is not a space or a closing quote
    end: int  # just past the terminator and any closing quotes
    confirmed_at: int  # offset of the character that settled it as complete


class SentenceTracker:
    """complete_sentences for text that grows a token at a time, without rescanning it all.

    Completeness never changes as text is appended, so the sentences found in the last text
    stay valid while the new text extends it; anything else (an edit, a rollback) rescans.
    """

    def __init__(self) -> None:
        self.text = ""
        self.sentences: list[Sentence] = []

    def complete_sentences(self, text: str) -> list[Sentence]:
        if not text.startswith(self.text):
            self.text, self.sentences = "", []
        resume = self.sentences[-1].end if self.sentences else 0
        self.sentences = self.sentences + complete_sentences(text, resume)
        self.text = text
        return self.sentences


def delayed_boundary(
    text: str,
    delay_sentences: int,
    stops: Sequence[str] = (),
    sentences: Sequence[Sentence] | None = None,
) -> int:
    """How much of ``text`` delayed delivery may send: all but the last ``delay_sentences``
    sentences (the one being written counts), and never a stop string or what could still
    become one. ``sentences``: complete_sentences(text), when the caller keeps them already.
    The gateway releases by it; the engine keeps an automatic rollback above it."""
    found = complete_sentences(text) if sentences is None else sentences
    ends = [s.end for s in found]
    if text[ends[-1] if ends else 0 :].strip():
        ends.append(len(text))  # the sentence being written
    boundary = ends[-(delay_sentences + 1)] if len(ends) > delay_sentences else 0
    if stops:
        at = stop_string_at(text, stops)
        boundary = min(boundary, at if at is not None else len(text))
        boundary = min(boundary, max(0, len(text) - max(len(s) for s in stops) + 1))
    return boundary


def complete_sentences(text: str, start: int = 0) -> list[Sentence]:
    """Every sentence in text[start:] that is already complete, in order.

    `start` must be 0 or the end of a complete sentence; the text before it is still read
    to recognise abbreviations.
    """
    sentences: list[Sentence] = []
    for run in _TERMINATOR_RUN.finditer(text, start):
        end, confirmed_at = settle(text, run)
        first = skip_leading(text, start)
        if confirmed_at is None or first >= run.start():
            continue  # not an end yet, or a stray mark with no sentence before it
        sentences.append(Sentence(first, end, confirmed_at))
        start = end
    return sentences


def settle(text: str, run: regex.Match) -> tuple[int, int | None]:
    """(sentence end, offset that confirms it) for one terminator run; None if not an end."""
    if run.group()[0] in CHINESE_TERMINATORS:
        return run.end(), run.start()
    end = skip_closers(text, run.end())
    if end < len(text) and _CJK.match(text, end):
        return end, end  # Chinese text written with ASCII punctuation has no spaces
    if end >= len(text) or not text[end].isspace():
        return end, None
    stop = classify_stop(text, run)
    if stop == "never":
        return end, None
    if stop == "ambiguous":
        return end, confirm_by_next_word(text, end)
    return end, end


def classify_stop(text: str, run: regex.Match) -> str:
    """ "final", "never" or "ambiguous" for an English terminator run followed by space."""
    mark = run.group()
    if "…" in mark or mark.count(".") >= 2:
        return "ambiguous"  # an ellipsis may trail off mid-sentence
    if mark != ".":
        return "final"
    if is_list_number(text, run.start()):
        return "never"
    word = _WORD_BEFORE.search(text, max(0, run.start() - 12), run.start()).group().lower()
    if word in NEVER_FINAL:
        return "never"
    if word in AMBIGUOUS or "." in word:
        return "ambiguous"  # "U.S." and "a.m." end a sentence only before a capital
    return "final"


def is_list_number(text: str, dot: int) -> bool:
    """Whether the "." at `dot` follows a list number alone at the start of its line."""
    line_start = text.rfind("\n", 0, dot) + 1
    return _LIST_NUMBER.fullmatch(text, line_start, dot) is not None


def confirm_by_next_word(text: str, after: int) -> int | None:
    """Offset of the next non-space character if it starts a new sentence, else None."""
    nxt = skip_spaces(text, after)
    if nxt >= len(text) or text[nxt].islower():
        return None
    return nxt


def skip_closers(text: str, i: int) -> int:
    while i < len(text) and text[i] in CLOSERS:
        i += 1
    return i


def skip_leading(text: str, i: int) -> int:
    """Past the spaces and closing quotes that follow the previous sentence."""
    while i < len(text) and (text[i].isspace() or text[i] in CLOSERS):
        i += 1
    return i


def skip_spaces(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i
