"""Text policies: keyword (literal words and phrases) and regex."""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Sequence
from typing import Any

import regex

from inference.message import Message
from inference.policies.base import (
    CJK_SCRIPTS,
    PHRASE_SLACK_CHARS,
    WORD_CHAR,
    Decision,
    Param,
    Policy,
    StepContext,
)
from inference.safe_regex import (
    SEARCH_TIMEOUT_S,
    WINDOW_CHARS,
    UnsafePatternError,
    compile_safe,
    search_recent,
)

log = logging.getLogger(__name__)


def literal_pattern(words: Sequence[str], case_sensitive: bool, whole_word: bool) -> regex.Pattern:
    """One alternation over `words`, longest first, group "w<i>" matching words[i].

    A whole word's trailing boundary is a lookahead that needs a character, so a keyword at
    the very end of the text waits for the next token to show it is not a longer word.
    """
    order = sorted(range(len(words)), key=lambda i: -len(words[i]))
    pattern = "|".join(f"(?P<w{i}>{bounded_literal(words[i], whole_word)})" for i in order)
    # Full case folding: "Straße" is "STRASSE", as a reader takes it.
    return regex.compile(pattern, 0 if case_sensitive else regex.IGNORECASE | regex.FULLCASE)


def bounded_literal(word: str, whole_word: bool) -> str:
    # Either Unicode form of an accented word ("é" as one character, or "e" and its accent):
    # text and keywords come from different keyboards and programs.
    forms = dict.fromkeys(unicodedata.normalize(form, word) for form in ("NFC", "NFD"))
    body = "|".join(spaced(form) for form in forms)
    body = body if len(forms) == 1 else f"(?:{body})"
    if not whole_word:
        return body
    left = r"(?<![^\W" + CJK_SCRIPTS + "])" if WORD_CHAR.match(word[0]) else ""
    right = r"(?=[\W" + CJK_SCRIPTS + "])" if WORD_CHAR.match(word[-1]) else ""
    return left + body + right


def spaced(word: str) -> str:
    """Any run of whitespace between words matches: models break lines and double spaces."""
    return r"\s+".join(regex.escape(part) for part in word.split())


def matched_word_index(match: regex.Match) -> int:
    return int(match.lastgroup[1:])


def text_evidence(match: regex.Match) -> dict[str, Any]:
    return {"matched": match.group(), "start": match.start(), "end": match.end()}


class KeywordPolicy(Policy):
    kind = "keyword"
    phase = "after_token"
    text_only = True
    PARAMS = (
        Param("keywords", "string_list", "Words or phrases that pause generation"),
        Param("case_sensitive", "boolean", "Match letter case exactly", default=False),
        Param(
            "whole_word",
            "boolean",
            "Do not match inside longer words (not applied to Chinese)",
            default=True,
        ),
    )

    def prepare(self) -> None:
        keywords = self.params["keywords"]
        if any(not word.strip() for word in keywords):
            raise self.config_error("keywords", Message("must not contain blank entries"))
        self.params["keywords"] = [word.strip() for word in keywords]
        self.compiled = literal_pattern(
            self.params["keywords"], self.params["case_sensitive"], self.params["whole_word"]
        )
        self.longest = max(len(word) for word in self.params["keywords"])

    def search_from(self, ctx: StepContext) -> int:
        """Earliest start of a match that the newest token can complete."""
        return max(0, ctx.new_text_start - self.longest - PHRASE_SLACK_CHARS)

    def settled_in_newest(self, match: regex.Match, ctx: StepContext) -> bool:
        """Whether the newest token completed this match, counting the boundary character
        that a whole word ending in a letter must wait for."""
        keyword = self.params["keywords"][matched_word_index(match)]
        waits = self.params["whole_word"] and WORD_CHAR.match(keyword[-1]) is not None
        return bool(match.end() + waits > ctx.new_text_start)

    def evaluate(self, ctx: StepContext) -> Decision | None:
        found = [
            m
            for m in search_recent(self.compiled, ctx.text, self.search_from(ctx))
            if self.settled_in_newest(m, ctx)
        ]
        if not found:
            return None
        match = found[0]
        keyword = self.params["keywords"][matched_word_index(match)]
        # One decision per token; a token completing several matches reports them all.
        occurrences = [[m.start(), m.end()] for m in found]
        evidence = {**text_evidence(match), "keyword": keyword, "occurrences": occurrences}
        return self.decide(
            ctx, f'Keyword "{keyword}" appeared', evidence, span=(match.start(), match.end())
        )


class RegexPolicy(Policy):
    kind = "regex"
    phase = "after_token"
    text_only = True
    PARAMS = (
        Param("pattern", "string", "Regular expression searched in the generated text"),
        Param("flags", "string", 'Any of "i" (ignore case), "m", "s", "x"', default=""),
    )

    def prepare(self) -> None:
        if not self.params["pattern"]:
            raise self.config_error("pattern", Message("must not be empty"))
        try:
            self.compiled = compile_safe(self.params["pattern"], self.params["flags"])
        except UnsafePatternError as err:
            field = "flags" if "flag" in str(err) else "pattern"
            raise self.config_error(
                field, Message("is rejected: %(error)s", error=err.args[0])
            ) from None

    def evaluate(self, ctx: StepContext) -> Decision | None:
        found = self.new_matches(ctx)
        if not found:
            return None
        match = found[0]
        evidence = {**text_evidence(match), "pattern": self.params["pattern"]}
        reason = f'Pattern /{self.params["pattern"]}/ matched "{match.group()}"'
        return self.decide(ctx, reason, evidence, span=(match.start(), match.end()))

    def new_matches(self, ctx: StepContext) -> list[regex.Match]:
        """The matches the newest token completed: those the text before it did not have.

        Compared by where they start, so a match that grows ("1", "12", "120") fires once,
        at the token that first completed it, and one confirmed by a lookahead ("5" before
        " mg") fires at the token that confirms it, although it ends before that token. The
        text before is searched from the same window start, so a match the window cuts
        short as the text grows is not new either.
        """
        start = max(0, len(ctx.text) - WINDOW_CHARS)
        found = [m for m in search_recent(self.compiled, ctx.text, start) if m.end() > m.start()]
        if not found:
            return []
        before = ctx.text[: ctx.new_text_start]
        try:
            # Not search_recent: a search of the text before that times out must not make
            # every match look new; the matches ending in the newest token are then taken.
            old = self.compiled.finditer(before, start, timeout=SEARCH_TIMEOUT_S)
            started = {m.start() for m in old if m.end() > m.start()}
        except TimeoutError:
            log.warning(
                "regex %r timed out after %.0f ms", self.compiled.pattern, SEARCH_TIMEOUT_S * 1000
            )
            return [m for m in found if m.end() > ctx.new_text_start]
        return [m for m in found if m.start() not in started]
