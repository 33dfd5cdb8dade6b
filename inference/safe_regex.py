"""Regular expressions from admins, compiled and searched so they cannot hang a worker.

Two guards, because neither is enough alone: `compile_safe` rejects patterns with a
quantified group that itself contains a quantifier (`(a+)+`, `(a*)*`, `(.*a){20}`), the
classic shape of catastrophic backtracking; and `search_recent` runs every search with the
`regex` package's timeout over a bounded window of recent text, which also stops the
patterns the heuristic cannot see (`(a|aa)+$`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import regex

from inference.message import Message

log = logging.getLogger(__name__)

SEARCH_TIMEOUT_S = 0.05
WINDOW_CHARS = 2000
# The largest count a repeat may give (`a{1000}`): the window searched is WINDOW_CHARS long,
# and compiling `a{1000000000}` alone took 23 GB before it failed.
MAX_REPEAT = WINDOW_CHARS
FLAG_BITS = {"i": regex.IGNORECASE, "m": regex.MULTILINE, "s": regex.DOTALL, "x": regex.VERBOSE}

_BRACES = regex.compile(r"\{(\d*)(?:(,)(\d*))?\}")


class UnsafePatternError(ValueError):
    """The pattern is invalid or likely to backtrack catastrophically."""


@dataclass(frozen=True)
class Quantifier:
    length: int  # characters the quantifier occupies in the pattern, modifiers included
    repeats: bool  # can match its operand more than once
    possessive: bool  # `*+`, `++`, ... never give back, so they cannot backtrack
    count: int = 0  # the largest count it names (`{2,5}`: 5); 0 for `*`, `+`, `?`


def compile_safe(pattern: str, flags: str = "") -> regex.Pattern:
    """Compile `pattern`, or raise UnsafePatternError saying why it is refused."""
    bits = 0
    for letter in flags:
        if letter not in FLAG_BITS:
            raise UnsafePatternError(
                Message('unknown flag "%(flag)s" (use any of "imsx")', flag=letter)
            )
        bits |= FLAG_BITS[letter]
    large = find_large_repeat(pattern)  # before compiling: compiling it is what exhausts memory
    if large is not None:
        template = (
            "a repeat count near %(near)r is over %(limit)s (the text searched is at most"
            " %(window)s characters); use + or * instead"
        )
        raise UnsafePatternError(
            Message(template, near=large, limit=MAX_REPEAT, window=WINDOW_CHARS)
        )
    try:
        compiled = regex.compile(pattern, bits)
    except regex.error as err:
        invalid = Message("invalid regular expression: %(error)s", error=str(err))
        raise UnsafePatternError(invalid) from None
    nested = find_nested_quantifier(as_read(pattern, compiled))
    if nested is not None:
        template = (
            "a repeated group contains another repeat near %(near)r, which can backtrack"
            " catastrophically; rewrite it without the nested quantifier"
        )
        raise UnsafePatternError(Message(template, near=nested))
    return compiled


# A verbose group inside the pattern, ``(?x:...)`` or ``(?ix)``: its spaces mean nothing either.
_VERBOSE_GROUP = regex.compile(r"\(\?[a-wyzA-Z-]*x")


def as_read(pattern: str, compiled: regex.Pattern) -> str:
    """The pattern as the engine reads it: in verbose mode spaces and ``#`` comments are not
    atoms, so ``(a+) +`` is ``(a+)+`` there (outside classes and escapes, which stay)."""
    if not (compiled.flags & regex.VERBOSE or _VERBOSE_GROUP.search(pattern)):
        return pattern
    kept, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            kept.append(pattern[i : i + 2])
            i += 2
        elif char == "[":
            end = skip_class(pattern, i)
            kept.append(pattern[i:end])
            i = end
        elif char == "#":  # a comment, to the line's end
            end = pattern.find("\n", i)
            i = len(pattern) if end < 0 else end
        else:
            kept.append("" if char.isspace() else char)
            i += 1
    return "".join(kept)


def find_nested_quantifier(pattern: str) -> str | None:
    """Return the pattern text ending at a repeated group that itself repeats, or None."""
    group_repeats: list[bool] = [False]  # one flag per open group: "contains a repeat"
    closed_repeats = False  # the atom just before the cursor is a group that contained one
    for i, char, quantifier in atoms(pattern):
        if quantifier is not None:
            if quantifier.repeats and closed_repeats and not quantifier.possessive:
                return near(pattern, i, quantifier)
            group_repeats[-1] |= quantifier.repeats or closed_repeats
            closed_repeats = False
        elif char == ")" and len(group_repeats) > 1:
            closed_repeats = group_repeats.pop()
            group_repeats[-1] |= closed_repeats
        else:
            closed_repeats = False
            if char == "(":
                group_repeats.append(False)
    return None


def find_large_repeat(pattern: str) -> str | None:
    """The pattern text ending at a counted repeat over MAX_REPEAT, or None."""
    for i, _char, quantifier in atoms(pattern):
        if quantifier is not None and quantifier.count > MAX_REPEAT:
            return near(pattern, i, quantifier)
    return None


def atoms(pattern: str) -> Iterator[tuple[int, str, Quantifier | None]]:
    """Each piece of the pattern with where it starts: a quantifier (with the char it starts
    with), or one character, an escape or a whole character class (their first char)."""
    i = 0
    while i < len(pattern):
        char, quantifier = pattern[i], read_quantifier(pattern, i)
        yield i, char, quantifier
        if quantifier is not None:
            i += quantifier.length
        elif char == "\\":
            i += 2
        elif char == "[":
            i = skip_class(pattern, i)
        else:
            i += 1


def near(pattern: str, i: int, quantifier: Quantifier) -> str:
    """The pattern text ending at the quantifier at ``i``, as a refusal quotes it."""
    return pattern[max(0, i - 20) : i + quantifier.length]


def read_quantifier(pattern: str, i: int) -> Quantifier | None:
    """The quantifier starting at pattern[i], if there is one."""
    char = pattern[i]
    count = 0
    if char in "*+":
        length, repeats = 1, True
    elif char == "?":
        length, repeats = 1, False
    elif char == "{":
        found = _BRACES.match(pattern, i)
        if found is None or not (found.group(1) or found.group(3)):
            return None  # a literal brace
        low, comma, high = found.groups()
        upper = int(high) if high else (None if comma else int(low))
        length, repeats = len(found.group()), upper is None or upper > 1
        count = max(int(low or 0), upper or 0)
    else:
        return None
    modifier = pattern[i + length] if i + length < len(pattern) else ""
    if modifier in ("?", "+"):
        length += 1
    return Quantifier(length, repeats, modifier == "+", count)


def skip_class(pattern: str, i: int) -> int:
    """Index just past the character class opening at pattern[i]."""
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1  # a leading "]" is a literal member
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j + 1


def search_recent(compiled: regex.Pattern, text: str, start: int = 0) -> Iterator[regex.Match]:
    """Matches from `start` within the last WINDOW_CHARS of `text`, offsets into the whole text.

    A search that runs past SEARCH_TIMEOUT_S is abandoned and logged: the worker must keep
    generating, and a policy that cannot decide in time simply does not fire.
    """
    start = max(start, len(text) - WINDOW_CHARS)
    try:
        # Materialise inside the try: the timeout is raised while iterating.
        yield from list(compiled.finditer(text, start, timeout=SEARCH_TIMEOUT_S))
    except TimeoutError:
        log.warning("regex %r timed out after %.0f ms", compiled.pattern, SEARCH_TIMEOUT_S * 1000)
