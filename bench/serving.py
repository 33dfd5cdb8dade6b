"""Benchmark serving many sessions at the engine level; prints one JSON object.

    python bench/serving.py                      # both backends, a few minutes
    python bench/serving.py --quick              # tiny sizes: checks that it runs
    python bench/serving.py --backends=vllm      # one backend
    python bench/serving.py --tokens=128         # longer generations per session

Per backend: aggregate tokens/s with 1, 4 and 8 sessions generating at once; manual pause
latency (from a reviewer's request, made by another thread at a random moment, to the
end of the step that halts the session) with 8 sessions generating; the mean step time of
one session; time to the first token after a resume at 1,024 tokens of context against a
cold prefill (on vLLM also the step after it, over the cached prefix). vLLM decodes the sessions in one batch; the transformers engine interleaves
them one token at a time, halting a session whose pause is waiting before the next token.
``transformers`` is the eager step (the floors compare with it); where the environment
compiles (CAESURA_COMPILE, on by default) ``transformers_compiled`` is measured too, and the
ratios name it (``vllm_8_sessions_vs_compiled_1``, ``compiled_vs_eager_single_stream``).

Shape: {"transformers": {"aggregate_tok_s": {"1": x, "4": x, "8": x}, "pause_latency_ms":
{"p50": x, "p95": x}, "step_ms": x, ...}, "vllm": {..., "resume_1024": {"prefix_cache_s": x,
"prefix_step_s": x, "cold_prefill_s": x}}, "ratios": {...}, "setup": {...}}. Ratios compare figures of one run.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from inference.control import ControlHandle  # noqa: E402
from inference.decode import RunRequest  # noqa: E402
from inference.loader import default_model_dir, load_backend, load_engine  # noqa: E402
from inference.sink import Sink  # noqa: E402
from inference.transformers_backend.settings import StepSettings  # noqa: E402

QUICK = "--quick" in sys.argv[1:]
BACKENDS = next(
    (a.split("=", 1)[1].split(",") for a in sys.argv[1:] if a.startswith("--backends=")),
    ["transformers", "vllm"],
)
CONCURRENCY = (1, 2) if QUICK else (1, 4, 8)
TOKENS = next(  # generated per session in the throughput runs
    (int(a.split("=", 1)[1]) for a in sys.argv[1:] if a.startswith("--tokens=")),
    6 if QUICK else 32,
)
ROUNDS = 1 if QUICK else 3  # interleaved throughput rounds
LOAD_SESSIONS = CONCURRENCY[-1]  # sessions generating while pauses are measured
PAUSES = 3 if QUICK else 16  # manual pauses measured
CONTEXT = 96 if QUICK else 1024  # tokens of context at the resume
SUBJECTS = ["a lighthouse keeper", "a glacier", "a market town", "a violin maker",
            "a night train", "an orchard", "a harbour pilot", "a desert observatory"]  # fmt: skip
FILLER = (
    "The committee reviewed the clinical notes, the dosage tables and the follow-up plan. "
    "Each reviewer wrote comments about the wording, the evidence and the risks involved. "
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def params(i: int, tokens: int) -> dict:
    return {"temperature": 0.7, "top_p": 0.95, "seed": i, "max_new_tokens": tokens}


def prompt(i: int) -> str:
    return f"Write a long, detailed story about {SUBJECTS[i % len(SUBJECTS)]}."


# ---- running N sessions at once, per backend ----------------------------------------------
def run_all(engine, states) -> None:
    """Generate for every state until each finishes: vLLM decodes them in one batch, the
    transformers engine interleaves them a token at a time."""
    pending = [engine.submit(state) for state in states]
    while not all(g.done for g in pending):
        engine.step()


def aggregate_tok_s(engine, sessions: int) -> float:
    states = [engine.start(prompt(i), params(i, TOKENS)) for i in range(sessions)]
    start = time.perf_counter()
    run_all(engine, states)
    elapsed = time.perf_counter() - start
    return sum(len(s.generated_ids) for s in states) / elapsed


def step_ms(engine) -> float:
    state = engine.start(prompt(0), {**params(0, TOKENS), "temperature": 0.0})
    engine.run(state, RunRequest(pause_at=1))  # the prefill, not timed
    start = time.perf_counter()
    engine.run(state)
    return 1000 * (time.perf_counter() - start) / max(1, len(state.generated_ids) - 1)


class Requester(threading.Thread):
    """Asks sessions to pause at random moments, like reviewers pressing Pause."""

    def __init__(self, controls: list[ControlHandle], count: int) -> None:
        super().__init__(daemon=True)
        self.controls, self.count = controls, count
        self.lock = threading.Lock()
        self.asked: dict[int, float] = {}  # session -> when its pause was asked
        self.latencies: list[float] = []

    @property
    def finished(self) -> bool:
        return len(self.latencies) >= self.count

    def run(self) -> None:
        rng = random.Random(0)
        while not self.finished:
            time.sleep(rng.uniform(0.05, 0.3))
            with self.lock:
                free = [i for i in range(len(self.controls)) if i not in self.asked]
                if free and len(self.latencies) + len(self.asked) < self.count:
                    i = rng.choice(free)
                    self.controls[i].request_pause("bench")
                    self.asked[i] = time.perf_counter()

    def check(self) -> None:
        """Time every pause the engine has honoured (it clears the request)."""
        with self.lock:
            for i in [i for i in self.asked if self.controls[i].poll() is None]:
                self.latencies.append(time.perf_counter() - self.asked.pop(i))


def pause_latency_ms(engine) -> dict:
    """Sessions keep generating; each paused session resumes at once. Also the step time
    under that load (vLLM: one batched step; transformers: one session's token)."""
    n = LOAD_SESSIONS
    states = [engine.start(prompt(i), params(i, 10_000)) for i in range(n)]
    controls = [ControlHandle() for _ in range(n)]
    requester = Requester(controls, PAUSES)
    steps: list[float] = []
    requester.start()
    running = {i: engine.submit(states[i], RunRequest(None, controls[i])) for i in range(n)}
    while not requester.finished:
        steps.append(timed(engine.step))
        requester.check()
        for i, generation in running.items():
            if generation.done:  # paused: resumed at once, the load stays at n sessions
                running[i] = engine.submit(states[i], RunRequest(None, controls[i]))
    for i in range(n):
        controls[i].request_cancel()
    while not all(g.done for g in running.values()):
        engine.step()
    return {**percentiles(requester.latencies), "step_under_load": percentiles(steps)}


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def percentiles(seconds: list[float]) -> dict:
    ms = sorted(1000 * x for x in seconds)
    # p95 by nearest rank: the value at rank ceil(0.95 n)
    return {"p50": statistics.median(ms), "p95": ms[max(0, math.ceil(0.95 * len(ms)) - 1)]}


# ---- resume at a long context -------------------------------------------------------
class TokenTimes(Sink):
    def __init__(self) -> None:
        self.at: list[float] = []

    def on_token(self, event) -> None:
        self.at.append(time.perf_counter())


def long_prompt(engine) -> list[int]:
    ids = engine.tokenizer.encode(FILLER * (CONTEXT // 30 + 2))[: CONTEXT - 8]
    return ids


def token_times_s(engine, state, tokens: int = 1) -> list[float]:
    """Seconds from the resume to each of its first ``tokens`` tokens."""
    sink = TokenTimes()
    start = time.perf_counter()
    engine.run(state, RunRequest(sink, pause_at=len(state.generated_ids) + tokens))
    return [at - start for at in sink.at]


def first_token_s(engine, state) -> float:
    return token_times_s(engine, state)[0]


def resume_vllm(engine) -> dict:
    """Resubmitting a paused session that vLLM still holds, against a cold prefill of the
    same context (restored from its snapshot, which keeps no logits, the cache reset). The
    resumed run draws its first token from the logits kept at the pause; its second takes
    vLLM's step over the cached prefix (``prefix_step_s``)."""
    cached, steps, cold = [], [], []
    for i in range(1 if QUICK else 3):
        state = engine.start(long_prompt(engine), params(100 + i, 10_000))
        engine.run(state, RunRequest(pause_at=8))
        first, second = token_times_s(engine, state, 2)
        cached.append(first)
        steps.append(second - first)
        restored = engine.restore(engine.snapshot(state))
        engine.llm.reset_prefix_cache()
        cold.append(first_token_s(engine, restored))
    return {
        "prefix_cache_s": statistics.median(cached),
        "prefix_step_s": statistics.median(steps),
        "cold_prefill_s": min(cold),
    }


def resume_transformers(engine) -> dict:
    """The KV kept in memory, against a rebuild (one prefill over every id)."""
    state = engine.start(long_prompt(engine), params(100, 10_000))
    engine.run(state, RunRequest(pause_at=8))
    memory = first_token_s(engine, state)
    rebuilt = engine.rebuild(state.to_checkpoint())
    start = time.perf_counter()
    rebuilt = engine.rebuild(state.to_checkpoint())
    prefill = time.perf_counter() - start
    return {"in_memory_s": memory, "rebuild_s": prefill + first_token_s(engine, rebuilt)}


# ---- both backends, then the report ---------------------------------------------------
def throughput(engines: dict) -> dict:
    """Aggregate tokens/s, backends and session counts interleaved over rounds (a slow
    spell of a shared machine hits them alike); the median round per figure."""
    runs: dict = {name: {str(n): [] for n in CONCURRENCY} for name in engines}
    for _ in range(ROUNDS):
        for n in CONCURRENCY:
            for name, engine in engines.items():
                runs[name][str(n)].append(aggregate_tok_s(engine, n))
    return {name: {n: statistics.median(v) for n, v in r.items()} for name, r in runs.items()}


def measure(name: str, engine) -> dict:
    out: dict = {"step_ms": step_ms(engine)}
    out["pause_latency_ms"] = pause_latency_ms(engine)
    log(f"{name}: pause latency {out['pause_latency_ms']}, step {out['step_ms']:.1f} ms")
    resume = resume_vllm if name == "vllm" else resume_transformers
    out[f"resume_{CONTEXT}"] = resume(engine)
    log(f"{name}: resume {out[f'resume_{CONTEXT}']}")
    return out


def ratios(report: dict) -> dict:
    if not {"transformers", "vllm"} <= set(report):
        return {}
    t, v = report["transformers"]["aggregate_tok_s"], report["vllm"]["aggregate_tok_s"]
    top = str(CONCURRENCY[-1])
    resume = report["vllm"][f"resume_{CONTEXT}"]
    compiled = report.get("transformers_compiled", {}).get("aggregate_tok_s")
    against_compiled = (
        {
            f"vllm_{top}_sessions_vs_compiled_1": v[top] / compiled["1"],
            "compiled_vs_eager_single_stream": compiled["1"] / t["1"],
        }
        if compiled
        else {}
    )
    return {
        **against_compiled,
        f"vllm_{top}_sessions_vs_transformers_1": v[top] / t["1"],
        "vllm_vs_transformers_single_stream": v["1"] / t["1"],
        "vllm_resume_speedup": resume["cold_prefill_s"] / resume["prefix_cache_s"],
        "vllm_resume_speedup_next_step": resume["cold_prefill_s"] / resume["prefix_step_s"],
        **{
            f"{name}_pause_p95_within_step_p95_plus_50ms": (
                report[name]["pause_latency_ms"]["p95"]
                <= report[name]["pause_latency_ms"]["step_under_load"]["p95"] + 50
            )
            for name in ("transformers", "vllm")
        },
    }


def load(name: str):
    """The floors compare with one eager transformers stream (``transformers``); the compiled
    step is its own row, where the environment compiles (CAESURA_COMPILE, on by default)."""
    if name == "transformers":
        return load_engine(default_model_dir(), settings=StepSettings(compile=False))
    if name == "transformers_compiled":
        return load_engine(default_model_dir(), settings=StepSettings(compile=True))
    return load_backend(name, default_model_dir())


def main() -> None:
    engines, report = {}, {}
    names = list(BACKENDS)
    if "transformers" in names and StepSettings.from_env().compile:
        names.insert(names.index("transformers") + 1, "transformers_compiled")
    for name in names:
        start = time.perf_counter()
        engines[name] = load(name)
        report[name] = {"load_s": time.perf_counter() - start}
        aggregate_tok_s(engines[name], 1)  # warm up
    for name, tok_s in throughput(engines).items():
        report[name]["aggregate_tok_s"] = tok_s
        log(f"{name}: {tok_s}")
    for name, engine in engines.items():
        report[name].update(measure(name, engine))
    report["ratios"] = ratios(report)
    report["setup"] = {
        "quick": QUICK,
        "tokens_per_session": TOKENS,
        "context": CONTEXT,
        "pauses": PAUSES,
        "load_sessions": LOAD_SESSIONS,
        "rounds": ROUNDS,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
