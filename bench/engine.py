"""Benchmark the decode engine on the default model; prints one JSON object.

    python bench/engine.py            # the full benchmark, a few minutes
    python bench/engine.py --quick    # tiny sizes: checks that it runs, measures nothing
    python bench/engine.py --only gating  # the attention-gating row alone (bench/gating.py)

Measures, in one run: decode speed against model.generate(), the share of each step in
signals + policies, the cost of live attention and of recording every token's similarity to
the prompt (what drift's calibration replays), time to the first token after resume (memory,
bytes, the worker's vault file, rebuild, re-prefill) at several context lengths, a tail edit
at 1,024 tokens, snapshot size and speed, and attention gating. "Time to the first token"
runs from the resume (or edit) call until the new token reaches the sink.

The generate() baseline is the model as ``from_pretrained`` loads it; the engine lays its
weights out for its step (runner.py): ``generate_same_weights`` is generate() on those.
Timings are repeated and interleaved: decode speeds are the median of DECODE_ROUNDS rounds,
each running every variant once, so a slow spell hits them all alike; for resume and edits
the engine's figure is the median of its runs, the re-prefill's the best of its runs.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gating import gating_row  # noqa: E402
from inference import decode as decode_mod  # noqa: E402
from inference.decode import RunRequest  # noqa: E402
from inference.loader import default_model_dir, load_engine  # noqa: E402
from inference.policies import PolicySet  # noqa: E402
from inference.sampler import sample  # noqa: E402
from inference.sink import Sink  # noqa: E402
from inference.state import Checkpoint  # noqa: E402
from inference.transformers_backend import engine as engine_mod  # noqa: E402
from inference.transformers_backend.settings import StepSettings  # noqa: E402
from reviewer.worker.vault import Vault  # noqa: E402

QUICK = "--quick" in sys.argv[1:]
ONLY = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv[1:-1] else None
DECODE_TOKENS = 8 if QUICK else 64
DECODE_ROUNDS = 1 if QUICK else 7  # interleaved rounds of every decode variant
RESUME_REPEATS = 1 if QUICK else 3
CONTEXTS = (32, 48, 64) if QUICK else (256, 1024, 2048)
EDIT_CONTEXT = CONTEXTS[1]  # the tail edit and the snapshot use this context length
GENERATED = 8  # tokens generated before the pause at each context length
PROMPT = "Write a long, detailed story about a lighthouse keeper who finds a strange map."
DEFAULT_POLICIES = [
    {
        "name": "terms",
        "kind": "keyword",
        "action": "flag",
        "params": {"keywords": ["map", "storm"]},
    },
    {"name": "unsure", "kind": "low_confidence", "action": "flag", "params": {"threshold": 0.2}},
    {"name": "absolute", "kind": "overconfidence", "action": "flag", "params": {"threshold": 0.92}},
    {"name": "every3", "kind": "sentence_count", "action": "flag", "params": {"every": 3}},
]
GREEDY = {"temperature": 0.0, "max_new_tokens": DECODE_TOKENS}
# int8's greedy top-1 agreement with float32 is counted over these prompts, teacher-forced
# on float32's own greedy continuation (so one early difference does not decide the rest).
AGREEMENT_PROMPTS = [
    PROMPT,
    "A patient has a mild headache. What can they take? Answer in two sentences.",
    "Summarize the tenant's obligations under a standard residential lease.",
    "Explain how an insurance underwriter weighs a history of water damage.",
    "List the side effects a nurse should watch for after a first dose of warfarin.",
    "Draft a short email declining a meeting politely.",
    "What is the difference between a contract that is void and one that is voidable?",
    "Describe the water cycle to a ten-year-old.",
]
FILLER = (
    "The committee reviewed the clinical notes, the dosage tables and the follow-up plan. "
    "Each reviewer wrote comments about the wording, the evidence and the risks involved. "
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def best(fn, repeats: int = 2) -> float:
    return min(timed(fn)[0] for _ in range(repeats))


def median(values: list[float]) -> float:
    return statistics.median(values)


def stock_model():
    """The model exactly as transformers loads it: the generate() baseline."""
    from transformers import AutoModelForCausalLM

    path = default_model_dir()
    return AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="sdpa"
    ).eval()


def decode_speed(engine, compiled, int8) -> dict:
    prompt_ids = engine.encode_prompt(PROMPT)
    ids = torch.tensor([prompt_ids])
    stock = stock_model()

    recording = engine_mod.Engine(engine.runner, engine.tokenizer, record_similarity=True)

    def run_engine(live=None, on=engine):
        state = on.start(prompt_ids, GREEDY, DEFAULT_POLICIES)
        on.run(state, RunRequest(live_attention=live))
        assert len(state.generated_ids) == DECODE_TOKENS, "EOS before the token budget"
        return state.generated_ids

    def run_generate(model):
        with torch.inference_mode():
            out = model.generate(
                ids, max_new_tokens=DECODE_TOKENS, min_new_tokens=DECODE_TOKENS, do_sample=False
            )
        return out[0, len(prompt_ids) :].tolist()

    variants = {
        "generate": lambda: run_generate(stock),
        "engine": run_engine,
        "live_mean": lambda: run_engine("mean"),
        "generate_same_weights": lambda: run_generate(engine.runner.model),
        "live_one_layer": lambda: run_engine(-1),
        # What a worker runs: every token's similarity to the prompt recorded (for drift's
        # calibration), with and without the live heatmap.
        "similarity": lambda: run_engine(on=recording),
        "live_mean_similarity": lambda: run_engine("mean", recording),
        "compiled": lambda: run_engine(on=compiled),
        "compiled_live_mean": lambda: run_engine("mean", compiled),
        "int8": lambda: run_engine(on=int8),
    }
    same_tokens = run_engine() == run_generate(stock)  # also warms both up
    compiled_same = run_engine(on=compiled) == run_engine()
    run_engine(on=int8)
    assert run_engine(on=recording) == run_engine(), "recording similarity changed a token"
    times = {name: [] for name in variants}
    for _ in range(DECODE_ROUNDS):
        for name, fn in variants.items():
            times[name].append(timed(fn)[0])
    seconds = {name: median(t) for name, t in times.items()}
    return {
        "tok_s": {name: DECODE_TOKENS / t for name, t in seconds.items()},
        "seconds": seconds,
        "same_tokens_as_generate": same_tokens,
        "compiled_same_tokens_as_engine": compiled_same,
        "spread": {name: [min(t), max(t)] for name, t in times.items()},
    }


def int8_agreement(engine, int8) -> float:
    """Share of positions where int8's greedy token is float32's, over AGREEMENT_PROMPTS:
    both read float32's greedy continuation in one forward and pick their top-1 at each."""
    agree = total = 0
    for prompt in AGREEMENT_PROMPTS[: 2 if QUICK else None]:
        state = engine.start(prompt, GREEDY)
        engine.run(state)
        ids, n = state.prompt_ids + state.generated_ids, len(state.generated_ids)
        picks = [
            e.runner.forward(ids, e.runner.new_cache(), keep=n).logits.argmax(-1)
            for e in (engine, int8)
        ]
        agree += int((picks[0] == picks[1]).sum())
        total += n
    return agree / total


def similarity_start_overhead(engine) -> float:
    """The start's extra cost when it records similarity: its prefill keeps the last layer's
    hidden states, whose mean over the prompt every token is compared with."""
    ids = context_ids(engine, EDIT_CONTEXT)
    recording = engine_mod.Engine(engine.runner, engine.tokenizer, record_similarity=True)
    plain, recorded = [], []
    for _ in range(RESUME_REPEATS):  # interleaved, as the decode rounds
        plain.append(timed(lambda: engine.start(ids, GREEDY, DEFAULT_POLICIES))[0])
        recorded.append(timed(lambda: recording.start(ids, GREEDY, DEFAULT_POLICIES))[0])
    return median(recorded) / median(plain) - 1


def policy_overhead(engine) -> float:
    """Time in signals + policy evaluation over the whole run time of the decode loop."""
    spent = [0.0]
    summarize, evaluate = decode_mod.summarize, PolicySet.evaluate

    def timed_summarize(*args, **kwargs):
        t = time.perf_counter()
        try:
            return summarize(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t

    def timed_evaluate(self, ctx):
        t = time.perf_counter()
        try:
            return evaluate(self, ctx)
        finally:
            spent[0] += time.perf_counter() - t

    decode_mod.summarize, PolicySet.evaluate = timed_summarize, timed_evaluate
    try:
        state = engine.start(PROMPT, GREEDY, DEFAULT_POLICIES)
        total, _ = timed(lambda: engine.run(state))
    finally:
        decode_mod.summarize, PolicySet.evaluate = summarize, evaluate
    return spent[0] / total


def context_ids(engine, length: int) -> list[int]:
    ids = engine.tokenizer.encode(FILLER * (length // 20 + 2))
    return ids[: length - GENERATED]


class FirstTokenSink(Sink):
    """Notes when the first new token reaches the sink: what a reviewer waits for."""

    def __init__(self) -> None:
        self.at: float | None = None

    def on_token(self, event) -> None:
        if self.at is None:
            self.at = time.perf_counter()


def first_token(engine, state, started: float) -> float:
    """Seconds from ``started`` until the first new token after resume is reported."""
    sink = FirstTokenSink()
    engine.run(state, RunRequest(sink, max_new_tokens=len(state.generated_ids) + 1))
    return sink.at - started


def best_of(fn, repeats: int = RESUME_REPEATS) -> float:
    return min(fn() for _ in range(repeats))


def median_of(fn, repeats: int = RESUME_REPEATS) -> float:
    return median([fn() for _ in range(repeats)])


def resume_paths(engine, vault, length: int) -> tuple[dict, object]:
    state = engine.start(context_ids(engine, length), GREEDY, DEFAULT_POLICIES)
    engine.run(state, RunRequest(pause_at=GENERATED))
    data = engine.snapshot(state)
    all_ids = state.prompt_ids + state.generated_ids

    def reprefill():  # the baseline: prefill everything again, then draw the next token
        started = time.perf_counter()
        cache = engine.runner.new_cache()
        out = engine.runner.forward(all_ids, cache)
        sample(out.logits[-1], state.params, torch.empty(0, dtype=torch.long), len(all_ids), 0)
        return time.perf_counter() - started

    def from_memory():
        started = time.perf_counter()
        elapsed = first_token(engine, state, started)
        engine.truncate(state, GENERATED)  # back to the pause for the next repeat
        return elapsed

    def from_bytes():
        started = time.perf_counter()
        return first_token(engine, engine.restore(data), started)

    def from_vault():  # the worker's path: the encrypted file (in the page cache), then bytes
        started = time.perf_counter()
        return first_token(engine, engine.restore(vault.get(length)), started)

    def rebuild():
        started = time.perf_counter()
        rebuilt = engine.rebuild(
            Checkpoint(state.prompt_ids, state.generated_ids, state.params, DEFAULT_POLICIES)
        )
        return first_token(engine, rebuilt, started)

    result = {
        "reprefill_s": best_of(reprefill),
        "memory_s": median_of(from_memory),
        "bytes_s": median_of(from_bytes),
    }
    vault.put(length, data)  # only now: its writing and freeing stay out of the other paths
    result["vault_s"] = median_of(from_vault)
    result["rebuild_s"] = median_of(rebuild, 1)
    engine.truncate(state, GENERATED)  # back to the pause, for the edit and snapshot checks
    return result, state


def tail_edit(engine, state, reprefill_s: float) -> dict:
    def edit_and_step():  # replace the last <= 8 generated tokens, then draw the next token
        n = len(state.generated_ids)
        started = time.perf_counter()
        engine.replace_tokens(state, n - min(n, GENERATED), n, " and the nurse agreed")
        return first_token(engine, state, started)

    return {"edit_resume_s": median_of(edit_and_step, 5), "reprefill_s": reprefill_s}


def snapshot_speed(engine, state) -> dict:
    write_s, data = timed(lambda: engine.snapshot(state))
    write_s = min(write_s, best(lambda: engine.snapshot(state)))
    read_s = best(lambda: engine.restore(data))
    mb = len(data) / 1e6
    return {
        "bytes_per_token": len(data) / state.position,
        "write_mb_s": mb / write_s,
        "read_mb_s": mb / read_s,
        "_size_mb": mb,
    }


def main() -> None:
    started = time.perf_counter()
    engine = load_engine(settings=StepSettings(compile=False))
    log(f"model loaded; threads={torch.get_num_threads()}")
    if ONLY is not None:
        print(json.dumps({"gating": gating_row}[ONLY](engine, QUICK), indent=2))
        return
    compile_s, compiled = timed(lambda: load_engine(settings=StepSettings(compile=True)))
    int8_s, int8 = timed(lambda: load_engine(settings=StepSettings(weights="int8")))
    log(f"compiled engines loaded in {compile_s:.1f} s (float) and {int8_s:.1f} s (int8)")
    speed = decode_speed(engine, compiled, int8)
    log(f"decode: {speed}")
    agreement = int8_agreement(engine, int8)
    overhead = policy_overhead(engine)
    start_overhead = similarity_start_overhead(engine)
    resume, states = {}, {}
    with tempfile.TemporaryDirectory() as directory:
        vault = Vault(Path(directory), "bench")
        for length in CONTEXTS:
            resume[str(length)], states[length] = resume_paths(engine, vault, length)
            log(f"resume {length}: {resume[str(length)]}")
    at = resume[str(EDIT_CONTEXT)]
    snapshot = snapshot_speed(engine, states[EDIT_CONTEXT])
    edit = tail_edit(engine, states[EDIT_CONTEXT], at["reprefill_s"])
    tok_s, seconds = speed["tok_s"], speed["seconds"]
    report = {
        "decode_tok_s": {
            "engine": tok_s["engine"],
            "generate": tok_s["generate"],
            "compiled": tok_s["compiled"],
            "int8": tok_s["int8"],
        },
        "int8_top1_agreement": agreement,
        "policy_overhead_fraction": overhead,
        "live_attention_overhead_fraction": seconds["live_mean"] / seconds["engine"] - 1,
        "compiled_live_attention_overhead_fraction": (
            seconds["compiled_live_mean"] / seconds["compiled"] - 1
        ),
        "similarity_overhead_fraction": {
            "decode": seconds["similarity"] / seconds["engine"] - 1,
            "decode_with_live_mean": seconds["live_mean_similarity"] / seconds["live_mean"] - 1,
            f"start_{EDIT_CONTEXT}": start_overhead,
        },
        "resume": resume,
        **gating_row(engine, QUICK),
        f"tail_edit_{EDIT_CONTEXT}": edit,
        "snapshot": {k: v for k, v in snapshot.items() if not k.startswith("_")},
        "decode_detail": {
            "generate_same_weights_tok_s": tok_s["generate_same_weights"],
            "live_one_layer_overhead_fraction": seconds["live_one_layer"] / seconds["engine"] - 1,
            "same_tokens_as_generate": speed["same_tokens_as_generate"],
            "compiled_same_tokens_as_engine": speed["compiled_same_tokens_as_engine"],
            "rounds": DECODE_ROUNDS,
            "seconds_min_max": speed["spread"],
        },
        "ratios": {
            "engine_vs_generate": tok_s["engine"] / tok_s["generate"],
            "compiled_vs_generate": tok_s["compiled"] / tok_s["generate"],
            "int8_vs_compiled": tok_s["int8"] / tok_s["compiled"],
            f"memory_resume_speedup_{EDIT_CONTEXT}": at["reprefill_s"] / at["memory_s"],
            f"bytes_resume_speedup_{EDIT_CONTEXT}": at["reprefill_s"] / at["bytes_s"],
            f"vault_resume_speedup_{EDIT_CONTEXT}": at["reprefill_s"] / at["vault_s"],
            f"rebuild_vs_reprefill_{EDIT_CONTEXT}": at["reprefill_s"] / at["rebuild_s"],
            f"tail_edit_speedup_{EDIT_CONTEXT}": edit["reprefill_s"] / edit["edit_resume_s"],
        },
        "setup": {
            "decode_tokens": DECODE_TOKENS,
            "threads": torch.get_num_threads(),
            f"snapshot_mb_at_{EDIT_CONTEXT}": snapshot["_size_mb"],
            "quick": QUICK,
            "compiled_load_s": {"float": compile_s, "int8": int8_s},
            "wall_s": time.perf_counter() - started,
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
