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

Modules: ``base`` (value types and the Policy base class), ``text`` (keyword, regex),
``signal_based`` (low confidence, high entropy, overconfidence, drift), ``sentence_count``,
``tool_call`` (with its JSON scanner), ``learned`` (a trained pause model), ``specs`` (the kinds and spec validation),
``budget`` (the pause budget), ``policy_set``, ``dry_run`` (text policies over sample text)
and ``replay`` (any policy over recorded generations). Import from this package; the names
below are its surface.
"""

from inference.policies.base import (
    DEFAULT_ABSOLUTE_WORDS,
    MAX_REMEMBERED_FIRINGS,
    PHRASE_SLACK_CHARS,
    SPEC_KEYS,
    Decision,
    Param,
    Policy,
    PolicyConfigError,
    StepContext,
    manual_decision,
)
from inference.policies.budget import PauseBudget, PauseLedger
from inference.policies.dry_run import (
    scan_text,
    simulated_tokens,
    text_step,
)
from inference.policies.learned import LearnedPolicy
from inference.policies.policy_set import PolicySet
from inference.policies.replay import (
    RecordedToken,
    ReplayStop,
    has_similarity,
    replay,
    similarity_policies,
    unreplayable,
)
from inference.policies.sentence_count import SentenceCountPolicy
from inference.policies.signal_based import (
    DriftPolicy,
    HighEntropyPolicy,
    LowConfidencePolicy,
    OverconfidencePolicy,
)
from inference.policies.specs import (
    POLICY_KINDS,
    TYPE_CHECKS,
    build_policy,
    check_param,
    is_number,
    range_problem,
    spec_action,
    spec_cooldown,
    spec_kind,
    spec_name,
    validate_params,
)
from inference.policies.text import (
    KeywordPolicy,
    RegexPolicy,
    bounded_literal,
    literal_pattern,
    matched_word_index,
    text_evidence,
)
from inference.policies.tool_call import (
    ToolCallPolicy,
    completed_objects,
    handle_string_char,
    may_open_object,
    parse_object,
)

__all__ = [
    "RecordedToken",
    "ReplayStop",
    "has_similarity",
    "replay",
    "similarity_policies",
    "unreplayable",
    "DEFAULT_ABSOLUTE_WORDS",
    "Decision",
    "manual_decision",
    "DriftPolicy",
    "HighEntropyPolicy",
    "KeywordPolicy",
    "LearnedPolicy",
    "LowConfidencePolicy",
    "MAX_REMEMBERED_FIRINGS",
    "OverconfidencePolicy",
    "PHRASE_SLACK_CHARS",
    "PauseBudget",
    "PauseLedger",
    "POLICY_KINDS",
    "Param",
    "Policy",
    "PolicyConfigError",
    "PolicySet",
    "RegexPolicy",
    "SPEC_KEYS",
    "SentenceCountPolicy",
    "StepContext",
    "TYPE_CHECKS",
    "ToolCallPolicy",
    "bounded_literal",
    "build_policy",
    "check_param",
    "completed_objects",
    "handle_string_char",
    "is_number",
    "literal_pattern",
    "matched_word_index",
    "may_open_object",
    "parse_object",
    "range_problem",
    "scan_text",
    "simulated_tokens",
    "spec_action",
    "spec_cooldown",
    "spec_kind",
    "spec_name",
    "text_evidence",
    "text_step",
    "validate_params",
]
