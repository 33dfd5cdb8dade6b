"""The attention-gating row of bench/engine.py (``--only gating`` runs it alone).

Speed: one 2,048-token context, prefilled once; the next token's decode step is timed with
and without the gate over the same cache, in interleaved rounds (medians), both eager (a
gated state decodes eagerly). The attention alone (every layer's attention call over the
same keys and values) is timed too, as it is the part the gate can shrink.

Quality, over the first case of each demo domain (reviewer/demo/demo_data.py, read as data):
full attention's greedy run of GATED_TOKENS tokens, then a gated state teacher-forced on
those tokens: top-1 agreement counts the steps where the gated model's greedy choice is the
full run's token; the attention mass kept is the gate's hit rate at every step (mean over
layers and heads); anchors kept is the share of steps where every head of every layer kept
every anchor position. A case without anchors gets its first clause anchored here.
"""

from __future__ import annotations

import re
import statistics
import time

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from inference.gating import GateConfig
from inference.transformers_backend import gate as gate_mod
from inference.transformers_backend import gated_attention, kv_cache
from reviewer.demo.demo_data import CASES

GATE = GateConfig(mode="gated")  # the design's defaults: 4 sinks, 64 window, top_k 10
FILLER = (
    "The committee reviewed the clinical notes, the dosage tables and the follow-up plan. "
    "Each reviewer wrote comments about the wording, the evidence and the risks involved. "
)


def gating_row(engine, quick: bool) -> dict:
    context = 128 if quick else 2048
    rounds = 1 if quick else 7
    speed = step_speed(engine, context, rounds)
    quality = agreement(engine, 1 if quick else len(CASES), 8 if quick else 100)
    return {
        f"gating_{context}": {
            "full_step_ms": speed["full_step_ms"],
            "gated_step_ms": speed["gated_step_ms"],
            **quality,
        },
        "gated_speedup": speed["full_step_ms"] / speed["gated_step_ms"],
        "gate_memory_fraction": speed["gate_memory_fraction"],
        "gating_detail": {
            "attention_full_ms": speed["attention_full_ms"],
            "attention_gated_ms": speed["attention_gated_ms"],
            "attention_speedup": speed["attention_full_ms"] / speed["attention_gated_ms"],
            # the most any gate could gain: the step with its attention taking no time at all
            "step_speedup_bound": speed["full_step_ms"]
            / max(speed["full_step_ms"] - speed["attention_full_ms"], 1e-9),
            "kept_positions": speed["kept"],
            "context": context,
            "rounds": rounds,
            "gate": GATE.to_dict(),
            "agreement_method": "teacher-forced on full attention's greedy tokens",
        },
    }


# ---- speed --------------------------------------------------------------------------------
def step_speed(engine, context: int, rounds: int) -> dict:
    runner = engine.runner
    ids = engine.tokenizer.encode(FILLER * (context // 20 + 2))[:context]
    params = {"max_new_tokens": 8, "attention": GATE.to_dict()}
    state = engine.start(ids[:-1], params)  # the prompt: every row but the timed one
    gate = gate_mod.of(state.cache)
    assert gate is not None
    length = state.cache.get_seq_length()
    last = ids[-1]

    def step(gated: bool) -> float:
        gate_mod.attach(state.cache, gate if gated else None)
        gate.prompt_length = length  # the timed row lies past the prompt: gated
        started = time.perf_counter()
        runner.forward([last], state.cache)
        elapsed = time.perf_counter() - started
        runner.crop(state.cache, length)
        return elapsed

    step(True), step(False)  # warm-up
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        for gated in (False, True):
            times[gated].append(step(gated))
    attention = attention_speed(runner, state.cache, gate, rounds)
    memory = gate.nbytes() / runner.cache_bytes(state.cache)
    return {
        "full_step_ms": 1000 * statistics.median(times[False]),
        "gated_step_ms": 1000 * statistics.median(times[True]),
        "gate_memory_fraction": memory,
        "kept": gate.kept,
        **attention,
    }


def attention_speed(runner, cache, gate, rounds: int) -> dict:
    """Every layer's attention call over the cache's keys and values, full and gated, for a
    query of the model's shape (the part of a step the gate changes)."""
    layers = kv_cache.tensors(cache)
    keys, _ = layers[0]
    config = runner.config.get_text_config()
    heads, dim = config.num_attention_heads, keys.shape[-1]
    query = torch.randn(1, heads, 1, dim)
    module = runner.model.model.layers[0].self_attn
    length = keys.shape[2]
    top_ks = [gate.config.top_k]

    def full() -> None:
        for k, v in layers:
            sdpa_attention_forward(module, query, k, v, None, scaling=dim**-0.5)

    def gated() -> None:
        for k, v in layers:
            plan = gated_attention.GatePlan(gate.config, gate.anchors, length - 1, top_ks)
            gated_attention.attend(plan, 0, query, k, v, dim**-0.5)

    times: dict[str, list[float]] = {"full": [], "gated": []}
    with torch.inference_mode():
        for _ in range(rounds + 1):
            for name, fn in (("full", full), ("gated", gated)):
                started = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - started)
    return {
        "attention_full_ms": 1000 * statistics.median(times["full"][1:] or times["full"]),
        "attention_gated_ms": 1000 * statistics.median(times["gated"][1:] or times["gated"]),
    }


# ---- quality ------------------------------------------------------------------------------
def anchored(text: str) -> str:
    """The case text, its first clause anchored when it carries no anchor of its own."""
    if "<ANCHOR:" in text:
        return text
    cut = re.search(r"[,:;.]", text)
    end = cut.start() if cut else len(text)
    return f"<ANCHOR:first>{text[:end]}</ANCHOR>{text[end:]}"


def agreement(engine, cases: int, tokens: int) -> dict:
    agree, mass, anchors_ok, steps = 0, [], 0, 0
    for domain in list(CASES)[:cases]:
        prompt = anchored(CASES[domain][0]["input"])
        full = engine.start(prompt, {"max_new_tokens": tokens})
        engine.run(full)
        gated = engine.start(prompt, {"max_new_tokens": tokens, "attention": GATE.to_dict()})
        gate = gate_mod.of(gated.cache)
        gate.measure_every, gate.capture = 1, True
        anchor = set(gate.anchors.tolist())
        for token in full.generated_ids:
            agree += int(int(gated.next_logits.argmax()) == token)
            gated.next_logits = engine.runner.forward([token], gated.cache).logits[-1]
            mass.append(gate.hit_rate)
            kept = [set(row.tolist()) for c in gate.captured for row in c.kept]
            anchors_ok += int(all(anchor <= k for k in kept))
            steps += 1
    return {
        "top1_agreement": agree / steps,
        "attention_mass_kept": statistics.mean(mass),
        "anchors_kept": anchors_ok / steps,
        "steps": steps,
    }
