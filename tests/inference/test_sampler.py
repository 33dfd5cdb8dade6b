from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from inference.config import SamplingConfigError, SamplingParams
from inference.sampler import apply_repetition_penalty, candidates, draw, sample, step_uniform


def logits(seed: int = 0, n: int = 50) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(seed)) * 3


def test_it_takes_the_argmax_when_greedy():
    x = logits()
    assert sample(x, SamplingParams(), torch.empty(0, dtype=torch.long), 7, 0) == int(x.argmax())


def test_it_draws_the_same_token_for_the_same_seed_position_and_attempt():
    params = SamplingParams(temperature=1.0, seed=11)
    empty = torch.empty(0, dtype=torch.long)
    draws = [sample(logits(), params, empty, 40, 0) for _ in range(5)]
    assert len(set(draws)) == 1


def test_it_varies_the_draw_with_position_attempt_and_seed():
    empty = torch.empty(0, dtype=torch.long)
    flat = torch.zeros(1000)  # uniform: distinct keys almost surely give distinct draws
    base = SamplingParams(temperature=1.0, seed=1)
    by_position = {sample(flat, base, empty, p, 0) for p in range(10)}
    by_attempt = {sample(flat, base, empty, 5, a) for a in range(10)}
    by_seed = {
        sample(flat, SamplingParams(temperature=1.0, seed=s), empty, 5, 0) for s in range(10)
    }
    assert min(len(by_position), len(by_attempt), len(by_seed)) >= 8


def test_it_keeps_only_the_top_k_tokens():
    x = logits(1)
    ids, probs = candidates(x.numpy(), top_k=3, top_p=1.0)
    assert set(ids.tolist()) == set(torch.topk(x, 3).indices.tolist())
    assert probs.sum() == pytest.approx(1.0)  # a distribution over the top-k


def test_it_keeps_the_smallest_nucleus_reaching_top_p():
    x = torch.log(torch.tensor([0.15, 0.5, 0.05, 0.3]))
    ids, probs = candidates(x.numpy(), top_k=0, top_p=0.8)
    assert ids.tolist() == [1, 3]  # most likely first
    assert probs.sum() == pytest.approx(0.8)  # renormalized by the draw, not here


def test_it_draws_each_candidate_as_often_as_its_probability():
    x = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    params = SamplingParams(temperature=1.0, seed=3)
    empty = torch.empty(0, dtype=torch.long)
    counts = Counter(sample(x, params, empty, position, 0) for position in range(8000))
    for token, p in enumerate([0.5, 0.3, 0.15, 0.05]):
        assert counts[token] / 8000 == pytest.approx(p, abs=0.02), counts


def test_it_draws_with_the_temperature_and_never_outside_the_nucleus():
    x = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    hot = SamplingParams(temperature=2.0, top_p=0.85, seed=3)
    empty = torch.empty(0, dtype=torch.long)
    counts = Counter(sample(x, hot, empty, position, 0) for position in range(8000))
    flat = torch.softmax(x / 2.0, -1)  # 0.38, 0.29, 0.21, 0.12: 0.88 before the last
    assert set(counts) == {0, 1, 2}
    for token in range(3):
        share = (flat[token] / flat[:3].sum()).item()
        assert counts[token] / 8000 == pytest.approx(share, abs=0.02), counts


def test_a_token_outside_the_candidates_never_changes_the_draw():
    x = logits(5, 49152) * 3
    params = SamplingParams(temperature=0.7, top_p=0.9, seed=2)
    empty = torch.empty(0, dtype=torch.long)
    ids, _ = candidates(x.numpy() / 0.7, 0, 0.9)
    outside = int(torch.argmin(x))
    assert outside not in ids.tolist()
    nudged = x.clone()
    nudged[outside] -= 5.0
    for position in range(50):
        assert sample(x, params, empty, position, 0) == sample(nudged, params, empty, position, 0)


def test_the_uniform_is_fixed_by_its_key_and_in_range():
    # A snapshot resumed by another process or version must draw the same: the number
    # comes from SHA-256 of the key, not from any library's random stream.
    assert step_uniform(0, 0, 0) == pytest.approx(0.29234, abs=1e-5)
    values = [step_uniform(1, p, 0) for p in range(2000)]
    assert min(values) >= 0.0 and max(values) < 1.0
    assert np.mean(values) == pytest.approx(0.5, abs=0.03)


def test_the_draw_takes_the_candidate_whose_mass_holds_u():
    ids, probs = np.array([7, 3, 9]), np.array([0.5, 0.3, 0.2])
    assert [draw(ids, probs, u) for u in (0.0, 0.49, 0.5, 0.79, 0.8, 0.999)] == [7, 7, 3, 3, 9, 9]
    zero_last = np.array([0.5, 0.5, 0.0])  # a token whose probability underflowed to 0
    assert draw(ids, zero_last, 1.0) == 3  # u rounded to the total: never the 0 token


def test_it_penalizes_tokens_already_seen_on_a_copy():
    x = np.array([2.0, -2.0, 1.0], dtype=np.float32)
    out = apply_repetition_penalty(x, np.array([0, 1, 0]), 2.0)
    assert out.tolist() == [1.0, -4.0, 1.0]
    assert x.tolist() == [2.0, -2.0, 1.0]  # the model's own row is left as it was


def test_it_penalizes_bit_for_bit_as_transformers_does():
    from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

    generator = torch.Generator().manual_seed(5)
    logits = torch.randn(1, 5000, generator=generator) * 20
    seen = torch.randint(0, 5000, (1, 400), generator=generator)
    for penalty in (1.05, 1.1, 1.3):
        expected = RepetitionPenaltyLogitsProcessor(penalty)(seen, logits.clone())[0].numpy()
        out = apply_repetition_penalty(logits[0].numpy(), seen[0].numpy(), penalty)
        assert out.dtype == np.float32
        assert np.array_equal(out.view(np.int32), expected.view(np.int32)), penalty


def test_it_rejects_out_of_range_parameters():
    with pytest.raises(SamplingConfigError, match="top_p"):
        SamplingParams(top_p=0)
    with pytest.raises(SamplingConfigError, match="unknown sampling parameter"):
        SamplingParams.from_dict({"temprature": 1})


@pytest.mark.parametrize(
    "bad",
    [
        {"top_k": 2.5},
        {"top_k": 3.0},
        {"top_alternatives": 2.5},
        {"top_alternatives": True},
        {"seed": "3"},
        {"max_new_tokens": 1e400},
        {"temperature": float("inf")},
        {"temperature": float("nan")},
        {"temperature": 10**400},
        {"temperature": True},
        {"top_p": float("nan")},
        {"repetition_penalty": "1.1"},
    ],
)
def test_it_takes_integers_for_integer_fields_and_finite_numbers_for_the_rest(bad):
    [name] = bad
    with pytest.raises(SamplingConfigError, match=name):
        SamplingParams.from_dict(bad)


def test_it_still_takes_an_integer_where_a_number_is_expected():
    assert SamplingParams.from_dict({"temperature": 1, "top_p": 1}).temperature == 1


@pytest.mark.parametrize(
    "bad",
    [
        {"temperature": 1e-40},
        {"temperature": 1e308},
        {"top_p": 1e-320},
        {"repetition_penalty": 1e-320},
    ],
)
def test_it_refuses_values_that_would_break_the_draw_mid_generation(bad):
    with pytest.raises(SamplingConfigError, match=next(iter(bad))):
        SamplingParams.from_dict(bad)


@pytest.mark.parametrize(
    "edge",
    [
        {"temperature": 0.001},
        {"temperature": 100.0},
        {"top_p": 0.001},
        {"repetition_penalty": 100.0},
    ],
)
def test_it_draws_a_token_at_the_edges_of_every_range(edge):
    params = SamplingParams.from_dict({"temperature": 1.0, **edge})
    context = torch.tensor([0, 1, 2])
    assert 0 <= sample(logits(3, 1000) * 10, params, context, 5, 0) < 1000


def test_it_round_trips_through_a_dict_and_switches_to_conservative():
    params = SamplingParams.for_task("open", seed=4)
    assert SamplingParams.from_dict(params.to_dict()) == params
    assert (params.conservative().temperature, params.conservative().top_p) == (0.3, 0.85)


def full_sort_nucleus(probs: torch.Tensor, top_p: float) -> list[int]:
    """The nucleus by sorting the whole vocabulary: what the fast path must equal."""
    sorted_probs, order = torch.sort(probs.double(), descending=True, stable=True)
    keep = (sorted_probs.cumsum(0) - sorted_probs) < top_p
    keep[0] = True
    return order[keep].tolist()


@pytest.mark.parametrize("scale", [0.5, 2.0, 8.0, 30.0])
@pytest.mark.parametrize("top_p", [0.5, 0.9, 0.95, 0.999])
def test_the_ranked_nucleus_is_the_full_sorts(scale, top_p):
    gen = torch.Generator().manual_seed(int(scale * 1000 + top_p * 100))
    for _ in range(5):
        # flat (thousands of candidates) to peaked (a few dominate)
        x = torch.randn(49152, generator=gen) * scale
        ids, _ = candidates(x.numpy(), 0, top_p)
        assert ids.tolist() == full_sort_nucleus(torch.softmax(x.double(), -1), top_p)
