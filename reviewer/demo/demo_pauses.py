"""How often the demo domains' policies pause on the demo cases: the measure their defaults
are tuned against. Runs the engine in-process (no worker, no database): a case is started
as a session would start it (the domain's system prompt, the task type's decoding, a fixed
seed) and resumed at every pause until it ends."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from inference.config import SamplingParams
from inference.gating import parse_anchors
from inference.transformers_backend.engine import Engine
from reviewer.demo.demo_data import DOMAINS
from reviewer.lifecycle import task_types

TOKENS = 200  # the yardstick: pauses per 200 generated tokens
MAX_PAUSES = 200  # a run that pauses more often than this is stopped and counted as it stands


@dataclass(frozen=True)
class CaseRun:
    tokens: int  # generated
    pauses: list[str]  # the policy behind each stop, in order
    text: str

    @property
    def per_200(self) -> float:
        return len(self.pauses) * TOKENS / max(self.tokens, 1)


def system_prompt(slug: str) -> str:
    return str(next(d["system_prompt"] for d in DOMAINS if d["slug"] == slug))


def case_params(case: dict[str, Any], max_new_tokens: int = TOKENS) -> SamplingParams:
    task, _ = task_types.choose(parse_anchors(case["input"])[0])  # as a session classifies it
    return SamplingParams.for_task(task, seed=case["seed"], max_new_tokens=max_new_tokens)


def run_case(
    engine: Engine, slug: str, case: dict[str, Any], specs: list[dict[str, Any]]
) -> CaseRun:
    """Generate the case under `specs`, resuming at every pause, as a reviewer who only
    presses Resume would."""
    params = case_params(case)
    state = engine.start(case["input"], params, specs, system=system_prompt(slug))
    pauses: list[str] = []
    while len(pauses) < MAX_PAUSES:
        stop = engine.run(state)
        if stop.reason != "pause":
            break
        pauses.append(stop.decision.policy if stop.decision else "")
    return CaseRun(len(state.generated_ids), pauses, state.text)


def median_per_200(runs: list[CaseRun]) -> float:
    return statistics.median(run.per_200 for run in runs)
