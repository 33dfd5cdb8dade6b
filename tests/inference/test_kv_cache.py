"""The engine's KV cache and forward shortcuts give what transformers' own path gives."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

from inference.transformers_backend import kv_cache
from inference.transformers_backend.layout import SmallBatchLinear, lay_out_wide_weights
from inference.transformers_backend.runner import ModelRunner


def gqa_model(tie: bool = False) -> LlamaForCausalLM:
    torch.manual_seed(3)
    config = LlamaConfig(
        vocab_size=300,
        hidden_size=96,
        intermediate_size=160,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=2,  # grouped-query, like the default model
        max_position_embeddings=1024,
        tie_word_embeddings=tie,
        attn_implementation="sdpa",
    )
    return LlamaForCausalLM(config).eval()


def reference_model() -> LlamaForCausalLM:
    """The same weights in the engine's layout, run by transformers alone."""
    model = gqa_model()
    lay_out_wide_weights(model)
    return model


def reference_logits(model, steps: list[list[int]], crop_at: dict[int, int]) -> list:
    """transformers' own DynamicCache and sdpa over the same forwards and crops."""
    cache, out = DynamicCache(config=model.config), []
    for i, ids in enumerate(steps):
        if i in crop_at:
            cache.crop(crop_at[i] - cache.get_seq_length())
        with torch.inference_mode():
            logits = model(
                torch.tensor([ids]), past_key_values=cache, use_cache=True, logits_to_keep=1
            ).logits
        out.append(logits[0, -1])
    return out


def test_it_decodes_like_transformers_own_cache_through_crops_and_growth():
    reference = reference_model()
    runner = ModelRunner(gqa_model())
    SmallBatchLinear.MAX_ROWS, saved = 0, SmallBatchLinear.MAX_ROWS  # exact linears here
    try:
        prompt = list(range(1, 200))
        steps = [prompt] + [[7 + i] for i in range(80)] + [[5, 6, 7]] + [[9]]
        crop_at = {81: 230, 82: 150}  # crop mid-generation, then again below the first
        cache, got = runner.new_cache(), []
        for i, ids in enumerate(steps):
            if i in crop_at:
                runner.crop(cache, crop_at[i])
            got.append(runner.forward(ids, cache).logits[-1])
        expected = reference_logits(reference, steps, crop_at)
    finally:
        SmallBatchLinear.MAX_ROWS = saved
    for ids, a, b in zip(steps, got, expected, strict=True):
        if len(ids) == 1 or ids is prompt:  # decode steps and the prefill: bit for bit
            assert torch.equal(a, b)
        else:  # a masked tail groups its query heads: the same sums, rounded apart
            assert torch.allclose(a, b, atol=1e-5)
    assert runner.cache_length(cache) == 150 + 1


def test_it_appends_a_token_in_place_instead_of_copying_the_cache():
    runner = ModelRunner(gqa_model())
    cache = runner.new_cache()
    runner.forward(list(range(1, 40)), cache)
    keys = runner.cache_tensors(cache)[0][0]
    before, pointer = keys.clone(), keys.data_ptr()
    runner.forward([3], cache)
    after = runner.cache_tensors(cache)[0][0]
    assert after.data_ptr() == pointer and after.shape[-2] == 40
    assert torch.equal(after[..., :39, :], before)


def test_it_grows_its_buffer_and_counts_the_spare_room():
    runner = ModelRunner(gqa_model())
    cache = runner.new_cache()
    runner.forward(list(range(1, 100)), cache)
    layers, kv_heads, dim = 2, 2, 16
    per_position = layers * 2 * kv_heads * dim * 4
    assert runner.cache_bytes(cache) == kv_cache.MIN_CAPACITY * per_position
    runner.forward(list(range(1, 200)), cache)  # 298 positions: the buffer doubles
    assert runner.cache_length(cache) == 298
    assert runner.cache_bytes(cache) == 2 * kv_cache.MIN_CAPACITY * per_position


def test_a_restored_cache_continues_like_the_original():
    runner = ModelRunner(gqa_model())
    cache = runner.new_cache()
    runner.forward(list(range(1, 50)), cache)
    copied = [(k.clone(), v.clone()) for k, v in runner.cache_tensors(cache)]
    restored = runner.cache_from_tensors(copied)
    assert runner.cache_length(restored) == 49
    a = runner.forward([4, 5], cache).logits
    b = runner.forward([4, 5], restored).logits
    assert torch.equal(a, b)


def test_the_cache_refuses_to_crop_beyond_its_length():
    runner = ModelRunner(gqa_model())
    cache = runner.new_cache()
    runner.forward([1, 2, 3], cache)
    with pytest.raises(ValueError, match="cannot crop"):
        runner.crop(cache, 4)


def test_masked_grouped_query_attention_matches_transformers():
    """A tail of several tokens after cached ones: no K/V repeat, same numbers."""
    reference = reference_model()
    runner = ModelRunner(gqa_model())
    SmallBatchLinear.MAX_ROWS, saved = 0, SmallBatchLinear.MAX_ROWS
    try:
        steps = [list(range(1, 120)), [11, 12, 13, 14, 15]]
        cache = runner.new_cache()
        got = [runner.forward(ids, cache, keep=len(ids)).logits for ids in steps][-1]
    finally:
        SmallBatchLinear.MAX_ROWS = saved
    ref_cache = DynamicCache(config=reference.config)
    with torch.inference_mode():
        for ids in steps:
            out = reference(torch.tensor([ids]), past_key_values=ref_cache, use_cache=True)
    assert torch.allclose(got, out.logits[0], atol=1e-5)
    assert got.argmax(-1).tolist() == out.logits[0].argmax(-1).tolist()


def test_a_few_rows_through_a_small_batch_linear_stay_within_rounding():
    torch.manual_seed(0)
    layer = torch.nn.Linear(96, 160)
    reference = torch.nn.functional.linear
    layer.__class__ = SmallBatchLinear
    one, few, many = torch.randn(1, 1, 96), torch.randn(1, 6, 96), torch.randn(1, 64, 96)
    with torch.inference_mode():
        assert torch.equal(layer(one), reference(one, layer.weight, layer.bias))
        assert torch.equal(layer(many), reference(many, layer.weight, layer.bias))
        assert torch.allclose(layer(few), reference(few, layer.weight, layer.bias), atol=1e-5)
        assert layer(few).shape == (1, 6, 160)


def test_the_runner_keeps_tied_weights_tied():
    model = gqa_model(tie=True)
    ModelRunner(model)
    assert isinstance(model.lm_head, SmallBatchLinear)
    assert model.lm_head.weight is model.model.embed_tokens.weight


def test_wide_weights_are_stored_column_major_with_the_same_values():
    model = gqa_model()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ModelRunner(model)
    assert not model.model.layers[0].mlp.up_proj.weight.is_contiguous()  # 160 out > 96 in
    assert model.model.layers[0].mlp.down_proj.weight.is_contiguous()
    for name, param in model.named_parameters():
        assert torch.equal(param, before[name]), name


def test_a_layer_crops_like_transformers_own():
    runner = ModelRunner(gqa_model())
    cache = runner.new_cache()
    runner.forward(list(range(1, 30)), cache)
    layer = cache.layers[0]
    layer.crop(-4)  # drop four positions
    assert layer.get_seq_length() == 25
    layer.crop(20)  # the older form: keep twenty
    assert layer.get_seq_length() == 20
    layer.crop(40)  # longer than the layer: nothing to drop
    assert layer.get_seq_length() == 20
