"""Pause policies: admin-configured rules that decide when generation stops.

A policy is built from plain JSON-able data (`build_policy`), looks at one decode step
(`StepContext`) and may return a `Decision` with a reason and its evidence. `PolicySet`
runs the policies of one phase, applies cooldowns and remembers firings so that each
trigger fires once, across pauses, resumes, edits and rollbacks.

Firing rules shared by every kind:
- Text policies fire at the token that completes their trigger: a match counts only if it
  ends inside the newest token's text. A whole-word keyword ending in a letter is complete
  once the next character is seen not to be a letter ("recommend" is not yet whole in
  "recommend|ed"), so it fires on that next token.
- A policy fires at most once per position and at most once per matched span; after firing
  at position p it stays silent through position p + cooldown.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import regex

from inference.safe_regex import UnsafePatternError, compile_safe, search_recent
from inference.sentences import SentenceTracker
from inference.signals import Signals

SPEC_KEYS = frozenset({"name", "kind", "action", "params", "cooldown", "enabled", "description"})
DEFAULT_ABSOLUTE_WORDS = (
    "definitely",
    "certainly",
    "100%",
    "guaranteed",
    "without doubt",
    "毫无疑问",
    "绝对",
    "百分之百",
)
PHRASE_SLACK_CHARS = 64  # extra whitespace a multi-word keyword may span, plus its boundary
MAX_REMEMBERED_FIRINGS = 64  # per policy; older spans are far outside any text window
_REQUIRED = object()
_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"
_WORD_CHAR = regex.compile(rf"[^\W{_CJK}]")  # letters that need word boundaries; not CJK


class PolicyConfigError(ValueError):
    """A policy spec is invalid; the message names the policy and the parameter."""

    def __init__(self, message: str, policy: str | None = None, field: str | None = None):
        super().__init__(message)
        self.policy = policy
        self.field = field


@dataclass(frozen=True)
class StepContext:
    phase: str  # "before_token" | "after_token"
    position: int  # index into generated ids (see the engine contract)
    signals: Signals
    text: str  # generated text so far (after_token: includes the new token's text)
    new_text_start: int  # after_token: offset in `text` where the newest token's text starts
    top1_history: Sequence[float]  # one per generated token, index = position
    entropy_history: Sequence[float]
    similarity_history: Sequence[float | None]  # cosine(token hidden, mean prompt hidden)


@dataclass(frozen=True)
class Decision:
    policy: str
    kind: str
    action: str  # "pause" | "rollback" | "flag"
    reason: str
    evidence: dict
    span: tuple[int, int] | None = None  # offsets into ctx.text of the matched text
    rollback_to: int | None = None  # keep generated ids[:rollback_to] and resample

    def to_dict(self) -> dict:
        data = asdict(self)
        data["span"] = list(self.span) if self.span is not None else None
        return data


@dataclass(frozen=True)
class Param:
    """One parameter of a policy kind: how to validate it and how an admin form shows it."""

    name: str
    type: str  # "number" | "integer" | "boolean" | "string" | "string_list"
    help: str
    default: Any = _REQUIRED
    min: float | None = None
    max: float | None = None
    exclusive_min: bool = False
    nullable: bool = False

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def to_dict(self) -> dict:
        data = {"type": self.type, "help": self.help, "required": self.required}
        if not self.required:
            data["default"] = (
                list(self.default) if isinstance(self.default, tuple) else self.default
            )
        for key in ("min", "max"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.exclusive_min:
            data["exclusive_min"] = True
        if self.nullable:
            data["nullable"] = True
        return data


class Policy:
    """Base class: one small subclass per kind, each with its PARAMS and `evaluate`."""

    kind: ClassVar[str]
    phase: ClassVar[str]
    needs_hidden_states: ClassVar[bool] = False
    text_only: ClassVar[bool] = False  # decides from text alone, so `scan_text` can run it
    actions: ClassVar[tuple[str, ...]] = ("pause", "flag")
    default_action: ClassVar[str] = "pause"
    PARAMS: ClassVar[tuple[Param, ...]] = ()

    def __init__(self, name: str, action: str, cooldown: int, params: dict, description: str = ""):
        self.name = name
        self.action = action
        self.cooldown = cooldown
        self.params = params
        self.description = description
        self.prepare()

    @classmethod
    def param_schema(cls) -> dict:
        """Parameters with types, defaults and bounds, for generating an admin form."""
        return {param.name: param.to_dict() for param in cls.PARAMS}

    def prepare(self) -> None:
        """Check parameters beyond their schema and precompute; raise config_error."""

    def evaluate(self, ctx: StepContext) -> Decision | None:
        raise NotImplementedError

    def config_error(self, field: str, message: str) -> PolicyConfigError:
        return PolicyConfigError(
            f'Policy "{self.name}" ({self.kind}): parameter "{field}" {message}',
            self.name,
            field,
        )

    def decide(self, ctx: StepContext, reason: str, evidence: dict, **extra: Any) -> Decision:
        evidence = {**evidence, "position": ctx.position, "signals": ctx.signals.to_dict()}
        return Decision(self.name, self.kind, self.action, reason, evidence, **extra)

    def to_spec(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "action": self.action,
            "params": json.loads(json.dumps(self.params)),
            "cooldown": self.cooldown,
            "enabled": True,
            "description": self.description,
        }


def literal_pattern(words: Sequence[str], case_sensitive: bool, whole_word: bool) -> regex.Pattern:
    """One alternation over `words`, longest first, group "w<i>" matching words[i].

    A whole word's trailing boundary is a lookahead that needs a character, so a keyword at
    the very end of the text waits for the next token to show it is not a longer word.
    """
    order = sorted(range(len(words)), key=lambda i: -len(words[i]))
    pattern = "|".join(f"(?P<w{i}>{bounded_literal(words[i], whole_word)})" for i in order)
    return regex.compile(pattern, 0 if case_sensitive else regex.IGNORECASE)


def bounded_literal(word: str, whole_word: bool) -> str:
    # Any run of whitespace between words matches: models break lines and double spaces.
    body = r"\s+".join(regex.escape(part) for part in word.split())
    if not whole_word:
        return body
    left = r"(?<![^\W" + _CJK + "])" if _WORD_CHAR.match(word[0]) else ""
    right = r"(?=[\W" + _CJK + "])" if _WORD_CHAR.match(word[-1]) else ""
    return left + body + right


def matched_word_index(match: regex.Match) -> int:
    return int(match.lastgroup[1:])


def text_evidence(match: regex.Match) -> dict:
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
            raise self.config_error("keywords", "must not contain blank entries")
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
        waits = self.params["whole_word"] and _WORD_CHAR.match(keyword[-1]) is not None
        return match.end() + waits > ctx.new_text_start

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
            raise self.config_error("pattern", "must not be empty")
        try:
            self.compiled = compile_safe(self.params["pattern"], self.params["flags"])
        except UnsafePatternError as err:
            field = "flags" if "flag" in str(err) else "pattern"
            raise self.config_error(field, f"is rejected: {err}") from None

    def evaluate(self, ctx: StepContext) -> Decision | None:
        found = [
            m
            for m in search_recent(self.compiled, ctx.text)
            if m.end() > ctx.new_text_start and m.end() > m.start()
        ]
        if not found:
            return None
        match = found[0]
        evidence = {**text_evidence(match), "pattern": self.params["pattern"]}
        reason = f'Pattern /{self.params["pattern"]}/ matched "{match.group()}"'
        return self.decide(ctx, reason, evidence, span=(match.start(), match.end()))


class LowConfidencePolicy(Policy):
    kind = "low_confidence"
    phase = "before_token"
    PARAMS = (
        Param(
            "threshold",
            "number",
            "Pause when the top-1 probability is below this",
            default=0.35,
            min=0.0,
            max=1.0,
        ),
    )

    def evaluate(self, ctx: StepContext) -> Decision | None:
        top1, threshold = ctx.signals.top1_prob, self.params["threshold"]
        if top1 >= threshold:
            return None
        reason = f"Top-1 probability {top1:.2f} is below {threshold:.2f}"
        return self.decide(ctx, reason, {"top1_prob": top1, "threshold": threshold})


class HighEntropyPolicy(Policy):
    kind = "high_entropy"
    phase = "before_token"
    PARAMS = (
        Param(
            "threshold",
            "number",
            "Pause when the entropy (nats) is above this",
            default=2.5,
            min=0.0,
            exclusive_min=True,
        ),
    )

    def evaluate(self, ctx: StepContext) -> Decision | None:
        entropy, threshold = ctx.signals.entropy, self.params["threshold"]
        if entropy <= threshold:
            return None
        reason = f"Entropy {entropy:.2f} nats is above {threshold:.2f}"
        return self.decide(ctx, reason, {"entropy": entropy, "threshold": threshold})


class OverconfidencePolicy(Policy):
    """Confident tokens near absolute wording: fires once per absolute word."""

    kind = "overconfidence"
    phase = "after_token"
    PARAMS = (
        Param(
            "threshold",
            "number",
            "Top-1 probability above which a token counts as confident",
            default=0.92,
            min=0.0,
            max=1.0,
        ),
        Param(
            "words", "string_list", "Absolute wording to look for", default=DEFAULT_ABSOLUTE_WORDS
        ),
        Param(
            "window_chars",
            "integer",
            "How many recent characters to search for absolute wording",
            default=200,
            min=1,
            max=10000,
        ),
    )

    def prepare(self) -> None:
        words = self.params["words"]
        if any(not word.strip() for word in words):
            raise self.config_error("words", "must not contain blank entries")
        self.params["words"] = [word.strip() for word in words]
        self.compiled = literal_pattern(self.params["words"], False, True)

    def evaluate(self, ctx: StepContext) -> Decision | None:
        top1, threshold = ctx.signals.top1_prob, self.params["threshold"]
        if top1 <= threshold:
            return None
        window_start = max(0, len(ctx.text) - self.params["window_chars"])
        found = list(self.compiled.finditer(ctx.text, window_start))
        if not found:
            return None
        match = found[-1]  # the newest absolute word; older ones have had their chance
        word = self.params["words"][matched_word_index(match)]
        evidence = {**text_evidence(match), "word": word, "top1_prob": top1, "threshold": threshold}
        reason = f'Top-1 probability {top1:.2f} above {threshold:.2f} right after "{match.group()}"'
        return self.decide(ctx, reason, evidence, span=(match.start(), match.end()))


class SentenceCountPolicy(Policy):
    """Pauses after every N complete sentences; see inference.sentences for the rule."""

    kind = "sentence_count"
    phase = "after_token"
    text_only = True
    PARAMS = (
        Param("every", "integer", "Pause after every this many complete sentences", min=1),
        Param(
            "max_pauses",
            "integer",
            "Stop pausing after this many pauses (empty: no limit)",
            default=None,
            min=1,
            nullable=True,
        ),
    )

    def prepare(self) -> None:
        self.tracker = SentenceTracker()  # a cache; decisions depend on ctx alone

    def evaluate(self, ctx: StepContext) -> Decision | None:
        sentences = self.tracker.complete_sentences(ctx.text)
        # Confirmation offsets only grow, sentence by sentence.
        before = bisect_left(sentences, ctx.new_text_start, key=lambda s: s.confirmed_at)
        every, limit = self.params["every"], self.params["max_pauses"]
        nth = len(sentences) // every
        if nth == before // every or (limit is not None and nth > limit):
            return None
        last = sentences[nth * every - 1]
        evidence = {
            "sentences": nth * every,
            "pause_number": nth,
            "sentence": ctx.text[last.start : last.end],
            "start": last.start,
            "end": last.end,
        }
        reason = f"{nth * every} complete sentence{'s' if nth * every != 1 else ''}"
        return self.decide(ctx, reason, evidence, span=(last.start, last.end))


class ToolCallPolicy(Policy):
    kind = "tool_call"
    phase = "after_token"
    text_only = True
    PARAMS = (Param("key", "string", "Key a JSON object must have to count", default="action"),)

    def prepare(self) -> None:
        if not self.params["key"]:
            raise self.config_error("key", "must not be empty")

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


def parse_object(candidate: str) -> dict | None:
    try:
        value = json.loads(candidate)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class DriftPolicy(Policy):
    """Rolls back when the text wanders: uncertain and unlike the prompt over a window."""

    kind = "drift"
    phase = "after_token"
    needs_hidden_states = True
    actions = ("rollback", "pause", "flag")
    default_action = "rollback"
    PARAMS = (
        Param("window", "integer", "Number of recent tokens averaged", default=8, min=1, max=512),
        Param(
            "entropy_threshold",
            "number",
            "Mean entropy (nats) above which the window is uncertain",
            default=2.5,
            min=0.0,
            exclusive_min=True,
        ),
        Param(
            "similarity_threshold",
            "number",
            "Mean cosine similarity to the prompt below which the window drifted",
            default=0.5,
            min=-1.0,
            max=1.0,
        ),
        Param(
            "confidence_floor",
            "number",
            "Roll back to just after the last token more confident than this",
            default=0.5,
            min=0.0,
            max=1.0,
        ),
    )

    def evaluate(self, ctx: StepContext) -> Decision | None:
        now = self.window_means(ctx, ctx.position)
        if now is None or not self.drifted(*now):
            return None
        previous = self.window_means(ctx, ctx.position - 1)
        if previous is not None and self.drifted(*previous):
            return None  # fire once, at the token where the drift began
        window_start = ctx.position - self.params["window"] + 1
        rollback_to = self.rollback_point(ctx.top1_history, window_start)
        evidence = self.drift_evidence(now, window_start, ctx.position, rollback_to)
        reason = (
            f"Drift over tokens {window_start}-{ctx.position}: mean entropy {now[0]:.2f}, "
            f"similarity to prompt {now[1]:.2f}"
        )
        keep = rollback_to if self.action == "rollback" else None
        return self.decide(ctx, reason, evidence, rollback_to=keep)

    def window_means(self, ctx: StepContext, last: int) -> tuple[float, float] | None:
        """(mean entropy, mean similarity) of the window ending at `last`, if all known."""
        first = last - self.params["window"] + 1
        if first < 0 or last >= len(ctx.entropy_history) or last >= len(ctx.similarity_history):
            return None
        similarities = ctx.similarity_history[first : last + 1]
        if any(s is None for s in similarities):
            return None
        entropies = ctx.entropy_history[first : last + 1]
        return math.fsum(entropies) / len(entropies), math.fsum(similarities) / len(similarities)

    def drifted(self, mean_entropy: float, mean_similarity: float) -> bool:
        return (
            mean_entropy > self.params["entropy_threshold"]
            and mean_similarity < self.params["similarity_threshold"]
        )

    def rollback_point(self, top1_history: Sequence[float], window_start: int) -> int:
        """One past the last token before the window more confident than the floor; else 0."""
        for i in range(min(window_start, len(top1_history)) - 1, -1, -1):
            if top1_history[i] > self.params["confidence_floor"]:
                return i + 1
        return 0

    def drift_evidence(
        self, means: tuple[float, float], start: int, end: int, rollback_to: int
    ) -> dict:
        return {
            "mean_entropy": means[0],
            "mean_similarity": means[1],
            "window": [start, end],
            "rollback_to": rollback_to,
            "entropy_threshold": self.params["entropy_threshold"],
            "similarity_threshold": self.params["similarity_threshold"],
            "confidence_floor": self.params["confidence_floor"],
        }


POLICY_KINDS: dict[str, type[Policy]] = {
    cls.kind: cls
    for cls in (
        KeywordPolicy,
        RegexPolicy,
        LowConfidencePolicy,
        HighEntropyPolicy,
        OverconfidencePolicy,
        SentenceCountPolicy,
        ToolCallPolicy,
        DriftPolicy,
    )
}


def build_policy(spec: dict) -> Policy:
    """A validated policy from its JSON-able spec; PolicyConfigError says what is wrong."""
    if not isinstance(spec, dict):
        raise PolicyConfigError(f"A policy spec must be an object, not {type(spec).__name__}")
    name = spec_name(spec)
    label = f'Policy "{name}"'
    unknown = sorted(set(spec) - SPEC_KEYS)
    if unknown:
        raise PolicyConfigError(f"{label}: unknown field(s) {', '.join(unknown)}", name, unknown[0])
    cls = spec_kind(spec, label, name)
    label = f'Policy "{name}" ({cls.kind})'
    action = spec_action(spec, cls, label, name)
    cooldown = spec_cooldown(spec, label, name)
    if not isinstance(spec.get("enabled", True), bool):
        raise PolicyConfigError(f'{label}: "enabled" must be true or false', name, "enabled")
    description = spec.get("description", "")
    if not isinstance(description, str):
        raise PolicyConfigError(f'{label}: "description" must be text', name, "description")
    params = validate_params(spec.get("params", {}), cls, label, name)
    return cls(name, action, cooldown, params, description)


def spec_name(spec: dict) -> str:
    name = spec.get("name")
    if not isinstance(name, str) or not name.strip():
        kind = spec.get("kind", "unknown kind")
        raise PolicyConfigError(f'A policy ({kind}) needs a non-empty "name"', None, "name")
    return name.strip()


def spec_kind(spec: dict, label: str, name: str) -> type[Policy]:
    kind = spec.get("kind")
    if kind not in POLICY_KINDS:
        known = ", ".join(POLICY_KINDS)
        raise PolicyConfigError(f"{label}: unknown kind {kind!r} (known: {known})", name, "kind")
    return POLICY_KINDS[kind]


def spec_action(spec: dict, cls: type[Policy], label: str, name: str) -> str:
    action = spec.get("action", cls.default_action)
    if action not in cls.actions:
        allowed = " or ".join(f'"{a}"' for a in cls.actions)
        raise PolicyConfigError(f"{label}: action {action!r} must be {allowed}", name, "action")
    return action


def spec_cooldown(spec: dict, label: str, name: str) -> int:
    cooldown = spec.get("cooldown", 0)
    if not isinstance(cooldown, int) or isinstance(cooldown, bool) or cooldown < 0:
        message = f'{label}: "cooldown" must be a whole number of tokens >= 0, not {cooldown!r}'
        raise PolicyConfigError(message, name, "cooldown")
    return cooldown


def validate_params(raw: Any, cls: type[Policy], label: str, name: str) -> dict:
    """Params checked against the kind's schema, with defaults filled in."""
    if not isinstance(raw, dict):
        raise PolicyConfigError(f'{label}: "params" must be an object', name, "params")
    known = {param.name for param in cls.PARAMS}
    unknown = sorted(set(raw) - known)
    if unknown:
        expected = ", ".join(sorted(known)) or "none"
        message = f'{label}: unknown parameter "{unknown[0]}" (expected: {expected})'
        raise PolicyConfigError(message, name, unknown[0])
    return {param.name: check_param(param, raw, label, name) for param in cls.PARAMS}


def check_param(param: Param, raw: dict, label: str, name: str) -> Any:
    def fail(message: str) -> PolicyConfigError:
        return PolicyConfigError(f'{label}: parameter "{param.name}" {message}', name, param.name)

    if param.name not in raw:
        if param.required:
            raise fail("is required")
        return list(param.default) if isinstance(param.default, tuple) else param.default
    value = raw[param.name]
    if value is None and param.nullable:
        return None
    problem = TYPE_CHECKS[param.type](value)
    if problem:
        raise fail(f"must be {problem}, not {value!r}")
    out_of_range = range_problem(param, value)
    if out_of_range:
        raise fail(f"must be {out_of_range}, not {value!r}")
    if param.type == "integer":
        return int(value)
    return list(value) if param.type == "string_list" else value


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


TYPE_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "number": lambda v: None if is_number(v) else "a number",
    "integer": lambda v: None if is_number(v) and float(v).is_integer() else "a whole number",
    "boolean": lambda v: None if isinstance(v, bool) else "true or false",
    "string": lambda v: None if isinstance(v, str) else "a string",
    "string_list": lambda v: (
        None
        if isinstance(v, list | tuple) and v and all(isinstance(s, str) for s in v)
        else "a non-empty list of strings"
    ),
}


def range_problem(param: Param, value: Any) -> str | None:
    if param.min is not None and (value <= param.min if param.exclusive_min else value < param.min):
        return f"> {param.min}" if param.exclusive_min else f">= {param.min}"
    if param.max is not None and value > param.max:
        return f"<= {param.max}"
    return None


class PolicySet:
    """The policies of one session, with the firing memory that cooldowns need."""

    def __init__(self, policies: Sequence[Policy]):
        names = [policy.name for policy in policies]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate is not None:
            raise PolicyConfigError(f'Policy name "{duplicate}" is used twice', duplicate, "name")
        self.policies = list(policies)
        # name -> [[position, span_start, span_end], ...]; span entries None when spanless
        self.fired: dict[str, list[list[int | None]]] = {name: [] for name in names}

    @classmethod
    def from_specs(cls, specs: list[dict]) -> PolicySet:
        """Build every enabled policy; disabled specs are skipped (and not in to_specs)."""
        if not isinstance(specs, list):
            raise PolicyConfigError("Policies must be a list of policy specs")
        enabled = [
            spec
            for spec in specs
            if not isinstance(spec, dict) or spec.get("enabled", True) is not False
        ]
        return cls([build_policy(spec) for spec in enabled])

    @property
    def needs_hidden_states(self) -> bool:
        return any(policy.needs_hidden_states for policy in self.policies)

    def evaluate(self, ctx: StepContext) -> list[Decision]:
        """Decisions of this phase's policies, minus those cooldown or repetition silence."""
        decisions = []
        for policy in self.policies:
            if policy.phase != ctx.phase or self.cooling_down(policy, ctx.position):
                continue
            decision = policy.evaluate(ctx)
            if decision is not None and not self.already_fired(policy.name, decision.span):
                self.remember(policy.name, ctx.position, decision.span)
                decisions.append(decision)
        return decisions

    def cooling_down(self, policy: Policy, position: int) -> bool:
        """Silent at and before its last firing, and for `cooldown` positions after it."""
        history = self.fired[policy.name]
        return bool(history) and position - history[-1][0] <= policy.cooldown

    def already_fired(self, name: str, span: tuple[int, int] | None) -> bool:
        return span is not None and any(entry[1:] == list(span) for entry in self.fired[name])

    def remember(self, name: str, position: int, span: tuple[int, int] | None) -> None:
        entry = [position, *(span if span is not None else (None, None))]
        self.fired[name] = [*self.fired[name], entry][-MAX_REMEMBERED_FIRINGS:]

    def state_dict(self) -> dict:
        return {
            "version": 1,
            "fired": {name: [list(e) for e in h] for name, h in self.fired.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore firings; policies no longer in the set are ignored."""
        fired = state.get("fired", {})
        for name in self.fired:
            entries = [[int(e[0]), e[1], e[2]] for e in fired.get(name, [])]
            self.fired[name] = sorted(entries, key=lambda e: e[0])  # cooldown reads the last

    def truncate(self, position: int) -> None:
        """Forget firings at positions >= position: that text was edited or rolled back."""
        for name, history in self.fired.items():
            self.fired[name] = [entry for entry in history if entry[0] < position]

    def to_specs(self) -> list[dict]:
        return [policy.to_spec() for policy in self.policies]


_SIMULATED_TOKEN = regex.compile(rf"\s*(?:[{_CJK}]|[^\W{_CJK}]+|[^\w\s])|\s+")
_END_OF_SAMPLE = "\n"


def simulated_tokens(text: str) -> list[str]:
    """Split like a tokenizer might: each word with its leading space, CJK characters and
    punctuation marks one at a time."""
    return _SIMULATED_TOKEN.findall(text)


def scan_text(specs: list[dict], text: str) -> list[Decision]:
    """Dry run of the text policies over sample text, for an admin's "try this policy".

    The text is fed in simulated tokens (`simulated_tokens`) through the after_token text
    policies (keyword, regex, sentence_count, tool_call), with cooldowns applied as in a
    real session. Policies that need model signals (low_confidence, high_entropy,
    overconfidence, drift) are skipped: sample text has no distribution. A final newline
    is fed after the sample so that a keyword or sentence at its very end completes;
    decisions never point past the sample.
    """
    every = PolicySet.from_specs(specs)  # validates all specs, including skipped ones
    policies = PolicySet([p for p in every.policies if p.text_only])
    decisions: list[Decision] = []
    fed = ""
    for position, token in enumerate([*simulated_tokens(text), _END_OF_SAMPLE]):
        ctx = text_step(fed + token, len(fed), position)
        decisions += [d for d in policies.evaluate(ctx) if d.span is None or d.span[1] <= len(text)]
        fed += token
    return decisions


def text_step(text: str, new_text_start: int, position: int) -> StepContext:
    """An after_token step with neutral signals, for feeding text without a model."""
    neutral = Signals(top1_prob=1.0, entropy=0.0, margin=1.0, alternatives=())
    return StepContext(
        phase="after_token",
        position=position,
        signals=neutral,
        text=text,
        new_text_start=new_text_start,
        top1_history=[1.0] * (position + 1),
        entropy_history=[0.0] * (position + 1),
        similarity_history=[None] * (position + 1),
    )
