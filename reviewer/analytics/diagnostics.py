"""Engine diagnostics: latency percentiles, per-step traces and an A/B run of two decodings.

Runs the engine in this process (no worker, no database unless a domain's policies are
asked for). A pause is counted and resumed at once, so every run goes to its end.
"""

from __future__ import annotations

import csv
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference.config import TASK_PRESETS, SamplingParams
from inference.decode import RunRequest
from inference.sink import RollbackEvent, Sink, TokenEvent
from reviewer.analytics.roi import percentile

if TYPE_CHECKING:
    from inference.state import DecodeState
    from inference.transformers_backend.engine import Engine

# Watches drift without acting on it, so every run records prompt similarity.
OBSERVE_DRIFT = {
    "name": "drift (observed)",
    "kind": "drift",
    "action": "flag",
    "params": {"window": 8, "entropy_threshold": 2.5, "similarity_threshold": 0.2},
}
MAX_PAUSES = 100  # per run: a policy that fires on every token must not loop forever


@dataclass
class StepTrace:
    position: int
    text: str
    probability: float
    entropy: float
    similarity: float | None


@dataclass
class RunResult:
    prompt: str
    first_token_s: float | None
    total_s: float
    tokens: int
    pauses: int
    rollbacks: int
    text: str
    steps: list[StepTrace] = field(default_factory=list)


class TimingSink(Sink):
    def __init__(self, started: float) -> None:
        self.started, self.rollbacks = started, 0
        self.first_token_at: float | None = None

    def on_token(self, event: TokenEvent) -> None:
        if self.first_token_at is None:
            self.first_token_at = time.perf_counter()

    def on_rollback(self, event: RollbackEvent) -> None:
        self.rollbacks += 1


def read_prompts(path: Path) -> list[str]:
    """A CSV with a "text" column, or plain text: one prompt a line, # comments skipped."""
    with open(path, encoding="utf-8", newline="") as handle:
        first = handle.readline()
        handle.seek(0)
        if first.strip().split(",")[0] == "text":
            return [row["text"] for row in csv.DictReader(handle) if row["text"].strip()]
        lines = (line.strip() for line in handle)
        return [line for line in lines if line and not line.startswith("#")]


def parse_config(raw: str) -> SamplingParams:
    """A task type ("deterministic", "open", "reasoning") or a JSON object of parameters."""
    if raw in TASK_PRESETS:
        return SamplingParams.for_task(raw)
    return SamplingParams.from_dict(json.loads(raw))


def run_prompt(
    engine: Engine,
    prompt: str,
    params: SamplingParams,
    policies: list[dict[str, Any]],
    system: str | None,
    limit: int,
) -> RunResult:
    started = time.perf_counter()
    sink = TimingSink(started)
    state = engine.start(prompt, params, [*policies, OBSERVE_DRIFT], system=system)
    pauses = 0
    stop = engine.run(state, RunRequest(sink, max_new_tokens=limit))
    while stop.reason == "pause" and pauses < MAX_PAUSES:
        pauses += 1
        stop = engine.run(state, RunRequest(sink, max_new_tokens=limit))
    total = time.perf_counter() - started
    first = sink.first_token_at - started if sink.first_token_at is not None else None
    return RunResult(prompt, first, total, len(state.generated_ids), pauses, sink.rollbacks,
                     state.text, trace(engine, state))  # fmt: skip


def trace(engine: Engine, state: DecodeState) -> list[StepTrace]:
    ids = state.generated_ids
    return [
        StepTrace(
            i,
            engine.token_text(t),
            state.top1_history[i],
            state.entropy_history[i],
            state.similarity_history[i],
        )  # fmt: skip
        for i, t in enumerate(ids)
    ]


def latency_table(results: list[RunResult]) -> dict[str, dict[str, float | None]]:
    firsts = [r.first_token_s for r in results if r.first_token_s is not None]
    totals = [r.total_s for r in results]
    return {
        name: {f"p{q}": percentile(values, q) for q in (50, 90, 95)}
        for name, values in (("first token", firsts), ("total", totals))
    }


def comparison(
    a: list[RunResult], b: list[RunResult]
) -> list[tuple[str, float | None, float | None]]:
    def figures(results: list[RunResult]) -> dict[str, float | None]:
        table = latency_table(results)
        n = len(results) or 1
        return {
            "first token p50 (s)": table["first token"]["p50"],
            "total p50 (s)": table["total"]["p50"],
            "total p95 (s)": table["total"]["p95"],
            "output tokens (mean)": sum(r.tokens for r in results) / n,
            "pauses (total)": sum(r.pauses for r in results),
            "rollbacks (total)": sum(r.rollbacks for r in results),
        }

    fa, fb = figures(a), figures(b)
    return [(name, fa[name], fb[name]) for name in fa]
