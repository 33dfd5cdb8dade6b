"""PolicySet: the policies of one session, with the firing memory that cooldowns need."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from inference.policies.base import (
    MAX_REMEMBERED_FIRINGS,
    Decision,
    Policy,
    PolicyConfigError,
    StepContext,
)
from inference.policies.specs import build_policy


class Firing(NamedTuple):
    """One remembered firing; stored as the list [position, span start, span end]."""

    position: int
    start: int | None  # the matched span, None when the decision has none
    end: int | None


class PolicySet:
    """The policies of one session, with the firing memory that cooldowns need."""

    def __init__(self, policies: Sequence[Policy]):
        names = [policy.name for policy in policies]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate is not None:
            raise PolicyConfigError(f'Policy name "{duplicate}" is used twice', duplicate, "name")
        self.policies = list(policies)
        self.fired: dict[str, list[Firing]] = {name: [] for name in names}

    @classmethod
    def from_specs(cls, specs: list[dict[str, Any]]) -> PolicySet:
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
        return bool(history) and position - history[-1].position <= policy.cooldown

    def already_fired(self, name: str, span: tuple[int, int] | None) -> bool:
        return span is not None and any(
            (entry.start, entry.end) == tuple(span) for entry in self.fired[name]
        )

    def remember(self, name: str, position: int, span: tuple[int, int] | None) -> None:
        entry = Firing(position, *span) if span is not None else Firing(position, None, None)
        self.fired[name] = [*self.fired[name], entry][-MAX_REMEMBERED_FIRINGS:]

    def state_dict(self) -> dict[str, Any]:
        return {
            "version": 1,
            "fired": {name: [list(e) for e in h] for name, h in self.fired.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore firings; policies no longer in the set are ignored."""
        fired = state.get("fired", {})
        for name in self.fired:
            entries = [Firing(int(e[0]), e[1], e[2]) for e in fired.get(name, [])]
            self.fired[name] = sorted(entries, key=lambda e: e.position)  # cooldown reads the last

    def truncate(self, position: int) -> None:
        """Forget firings at positions >= position: that text was edited or rolled back."""
        for name, history in self.fired.items():
            self.fired[name] = [entry for entry in history if entry.position < position]

    def to_specs(self) -> list[dict[str, Any]]:
        return [policy.to_spec() for policy in self.policies]
