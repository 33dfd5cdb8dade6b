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
``budget`` (the pause budget), ``policy_set``, ``phases`` (one phase's policies over a
generation, routed: the policy half of the decode boundary, shared by the engine and the
replay), ``dry_run`` (text policies over sample text) and ``replay`` (any policy over
recorded generations). Import from this package; the names
below are its surface.
"""

from inference.policies.base import (
    Decision,
    Policy,
    PolicyConfigError,
    StepContext,
    manual_decision,
)
from inference.policies.budget import PauseBudget
from inference.policies.dry_run import scan_text, simulated_tokens, text_step
from inference.policies.policy_set import PolicySet, Routed
from inference.policies.replay import (
    RecordedToken,
    ReplayStop,
    has_similarity,
    replay,
    similarity_policies,
    unreplayable,
)
from inference.policies.signal_based import DRIFT_PRESETS, with_task_presets
from inference.policies.specs import POLICY_KINDS, build_policy

__all__ = [
    "DRIFT_PRESETS",
    "POLICY_KINDS",
    "Decision",
    "PauseBudget",
    "Policy",
    "PolicyConfigError",
    "PolicySet",
    "RecordedToken",
    "ReplayStop",
    "Routed",
    "StepContext",
    "build_policy",
    "has_similarity",
    "manual_decision",
    "replay",
    "scan_text",
    "similarity_policies",
    "simulated_tokens",
    "text_step",
    "unreplayable",
    "with_task_presets",
]
