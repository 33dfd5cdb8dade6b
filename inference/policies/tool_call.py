"""The tool_call policy and its JSON scanner: a pause when the text completes a JSON
object that names a tool."""

from __future__ import annotations

import json
from typing import Any

import regex

from inference.message import Message
from inference.policies.base import Decision, Param, Policy, StepContext


class ToolCallPolicy(Policy):
    kind = "tool_call"
    phase = "after_token"
    text_only = True
    PARAMS = (Param("key", "string", "Key a JSON object must have to count", default="action"),)

    def prepare(self) -> None:
        if not self.params["key"]:
            raise self.config_error("key", Message("must not be empty"))

    def evaluate(self, ctx: StepContext) -> Decision | None:
        if "}" not in ctx.text[ctx.new_text_start :]:
            return None  # the common case, skipped without scanning
        for start, end in completed_objects(ctx.text, ctx.new_text_start):
            obj = parse_object(ctx.text[start:end])
            if obj is not None and self.params["key"] in obj:
                evidence = {"object": obj, "start": start, "end": end, "key": self.params["key"]}
                reason = (
                    f'Tool call with "{self.params["key"]}": {json.dumps(obj[self.params["key"]])}'
                )
                return self.decide(ctx, reason, evidence, span=(start, end))
        return None


_JSON_CHARS = regex.compile(r'[{}"\\]')
_SPACES = regex.compile(r"\s*")


def completed_objects(text: str, since: int) -> list[tuple[int, int]]:
    """(start, end) of outermost {...} blocks whose closing brace is at or after `since`.

    Quotes are only tracked inside braces, so apostrophes and quotes in prose around the
    JSON do not matter; braces inside JSON strings are ignored, escapes respected.
    """
    opens: list[int] = []
    in_string = False
    skip_until = -1
    found = []
    for char_match in _JSON_CHARS.finditer(text):
        i, char = char_match.start(), char_match.group()
        if i < skip_until:
            continue
        if in_string:
            in_string, skip_until = handle_string_char(char, i, skip_until)
        elif char == '"' and opens:
            in_string = True
        elif char == "{" and may_open_object(text, i):
            opens.append(i)
        elif char == "}" and opens:
            start = opens.pop()
            if not opens and i >= since:
                found.append((start, i + 1))
    return found


def may_open_object(text: str, i: int) -> bool:
    """A JSON object's "{" is followed by a key or "}"; prose braces like "{a, b}" are not."""
    after = _SPACES.match(text, i + 1).end()
    return after == len(text) or text[after] in '"}'


def handle_string_char(char: str, i: int, skip_until: int) -> tuple[bool, int]:
    """(still in string, skip_until) after a special character inside a JSON string."""
    if char == "\\":
        return True, i + 2  # the escaped character is never special
    return char != '"', skip_until


def parse_object(candidate: str) -> dict[str, Any] | None:
    try:
        value = json.loads(candidate)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
