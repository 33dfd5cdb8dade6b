"""PolicySet: the policies of one session, with the firing memory that cooldowns need, the
pause budget that limits them, and the policies a reviewer muted for this session."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from inference.message import Message
from inference.policies.base import (
    MAX_REMEMBERED_FIRINGS,
    Decision,
    Policy,
    PolicyConfigError,
    StepContext,
)
from inference.policies.budget import (
    PauseBudget,
    PauseLedger,
    as_flag,
    before_first_word,
    refusal,
)
from inference.policies.specs import build_policy


class Firing(NamedTuple):
    """One remembered firing; stored as the list [position, span start, span end]."""

    position: int
    start: int | None  # the matched span, None when the decision has none
    end: int | None


class Routed(NamedTuple):
    """One step's decisions sorted: what pauses, what rolls back, what is only reported."""

    pauses: list[Decision]  # the one allowed pause, with any rollback decisions beside it
    rollback: Decision | None  # a rollback to apply (no pause at this step)
    flags: list[Decision]  # to report, in order


class PolicySet:
    """The policies of one session, with the firing memory that cooldowns need."""

    def __init__(
        self,
        policies: Sequence[Policy],
        budget: PauseBudget | None = None,
        muted: Sequence[str] = (),
    ):
        names = [policy.name for policy in policies]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate is not None:
            twice = Message('Policy name "%(name)s" is used twice', name=duplicate)
            raise PolicyConfigError(twice, duplicate, "name")
        self.policies = list(policies)
        self.fired: dict[str, list[Firing]] = {name: [] for name in names}
        self.budget = budget or PauseBudget()
        self.ledger = PauseLedger()
        self.muted: frozenset[str] = frozenset(muted)

    @classmethod
    def from_specs(
        cls,
        specs: list[dict[str, Any]],
        budget: PauseBudget | dict[str, Any] | None = None,
        muted: Sequence[str] = (),
    ) -> PolicySet:
        """Build every enabled policy; disabled specs are skipped (and not in to_specs)."""
        if not isinstance(specs, list):
            raise PolicyConfigError(Message("Policies must be a list of policy specs"))
        enabled = [
            spec
            for spec in specs
            if not isinstance(spec, dict) or spec.get("enabled", True) is not False
        ]
        if not isinstance(budget, PauseBudget):
            budget = PauseBudget.from_dict(budget)
        return cls([build_policy(spec) for spec in enabled], budget, muted)

    def mute(self, names: Sequence[str]) -> None:
        """Silence these policies from the next step on (a reviewer's choice for a session)."""
        self.muted = frozenset(names)

    @property
    def needs_hidden_states(self) -> bool:
        return any(policy.needs_hidden_states for policy in self.policies)

    def evaluate(self, ctx: StepContext) -> list[Decision]:
        """Decisions of this phase's policies, minus those cooldown or repetition silence."""
        decisions = []
        for policy in self.policies:
            if policy.phase != ctx.phase or policy.name in self.muted:
                continue
            if self.cooling_down(policy, ctx.position):
                continue
            decision = policy.evaluate(ctx)
            if decision is not None and not self.already_fired(policy.name, decision.span):
                self.remember(policy.name, ctx.position, decision.span)
                decisions.append(decision)
        return decisions

    def arbitrate(
        self, pauses: list[Decision], position: int, text: str
    ) -> tuple[Decision | None, list[Decision]]:
        """Of the decisions that want to pause when ``position`` tokens exist, the one that
        may (highest priority first, then policy order), and the others as flags saying why
        not."""
        rank = {policy.name: (-policy.priority, i) for i, policy in enumerate(self.policies)}
        ordered = sorted(pauses, key=lambda d: rank.get(d.policy, (0, len(rank))))
        winner: Decision | None = None
        flags: list[Decision] = []
        for decision in ordered:
            if winner is not None:
                flags.append(as_flag(decision, "priority", f'"{winner.policy}" paused here'))
            elif (why := self.refusal(decision, position, text)) is not None:
                flags.append(as_flag(decision, why[0], why[1]))
            else:
                winner = decision
        return winner, flags

    def route(
        self,
        decisions: list[Decision],
        position: int,
        text: str,
        may_roll_back: Callable[[Decision], bool] | None = None,
    ) -> Routed:
        """Sort one step's decisions. The budget picks at most one pause (``arbitrate``) and
        the others become flags; a pause outranks a rollback (the reviewer sees the rollback
        with it). Without ``may_roll_back`` (a backend or a replay that cannot follow one) a
        rollback without a pause is a flag; with it, the first rollback is applied if it
        allows, else reported as a flag after the others."""
        pause, refused = self.arbitrate(
            [d for d in decisions if d.action == "pause"], position, text
        )
        pauses = [pause] if pause is not None else []
        rollbacks = [d for d in decisions if d.action == "rollback"]
        first = rollbacks[0] if rollbacks and may_roll_back is not None else None
        flags = [
            d
            for d in decisions
            if d.action == "flag" or (d.action == "rollback" and not pauses and d is not first)
        ]
        flags += refused  # over the budget or outranked: kept as a flag
        if pauses:
            return Routed(pauses + rollbacks, None, flags)
        if first is not None and may_roll_back is not None and not may_roll_back(first):
            return Routed([], None, [*flags, first])
        return Routed([], first, flags)

    def refusal(self, decision: Decision, position: int, text: str) -> tuple[str, str] | None:
        """(rule, why) the budget refuses this pause, or None."""
        policy = next((p for p in self.policies if p.name == decision.policy), None)
        early = policy is not None and policy.may_pause_before_first_word
        if self.budget.hold_until_first_word and not early and before_first_word(text):
            return "first_word", "no text yet; policies pause after the first word"
        why = refusal(self.budget, self.ledger, position)
        return ("budget", f"over the pause budget, {why}") if why is not None else None

    def note_pause(self, position: int, policy: bool) -> None:
        """A pause happened when ``position`` tokens existed (``policy``: a policy made it)."""
        self.ledger.note(position, policy)

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
            "pauses": self.ledger.to_list(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore firings; policies no longer in the set are ignored."""
        fired = state.get("fired", {})
        for name in self.fired:
            entries = [Firing(int(e[0]), e[1], e[2]) for e in fired.get(name, [])]
            self.fired[name] = sorted(entries, key=lambda e: e.position)  # cooldown reads the last
        self.ledger = PauseLedger.from_list(state.get("pauses", []))

    def truncate(self, position: int) -> None:
        """Forget firings at positions >= position: that text was edited or rolled back."""
        for name, history in self.fired.items():
            self.fired[name] = [entry for entry in history if entry.position < position]
        self.ledger.truncate(position)

    def to_specs(self) -> list[dict[str, Any]]:
        return [policy.to_spec() for policy in self.policies]
