from __future__ import annotations

import pytest
import torch

from inference.config import SamplingConfigError, SamplingParams
from inference.sampler import apply_repetition_penalty, filtered_probs, nucleus, sample


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
    probs = filtered_probs(x, top_k=3, top_p=1.0)
    assert set(torch.nonzero(probs).flatten().tolist()) == set(torch.topk(x, 3).indices.tolist())


def test_it_keeps_the_smallest_nucleus_reaching_top_p():
    x = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    probs = filtered_probs(x, top_k=0, top_p=0.8)
    assert torch.nonzero(probs).flatten().tolist() == [0, 1]
    assert probs.sum().item() == pytest.approx(0.8)  # renormalized by multinomial, not here


def test_it_penalizes_tokens_already_seen():
    x = torch.tensor([2.0, -2.0, 1.0])
    out = apply_repetition_penalty(x, torch.tensor([0, 1]), 2.0)
    assert out.tolist() == [1.0, -4.0, 1.0]


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


def full_sort_nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """The nucleus by sorting the whole vocabulary: what the fast path must equal."""
    sorted_probs, order = torch.sort(probs, descending=True)
    drop = (sorted_probs.cumsum(0) - sorted_probs) >= top_p
    return torch.zeros_like(probs).scatter(0, order, sorted_probs.masked_fill(drop, 0.0))


@pytest.mark.parametrize("scale", [0.5, 2.0, 8.0, 30.0])
@pytest.mark.parametrize("top_p", [0.5, 0.9, 0.95, 0.999])
def test_the_ranked_nucleus_is_the_full_sorts_bit_for_bit(scale, top_p):
    gen = torch.Generator().manual_seed(int(scale * 1000 + top_p * 100))
    for _ in range(5):
        # flat (many candidates: the fallback) to peaked (a few dominate: the fast path)
        probs = torch.softmax(torch.randn(49152, generator=gen) * scale, dim=-1)
        assert torch.equal(nucleus(probs, top_p), full_sort_nucleus(probs, top_p))
