from __future__ import annotations

import pytest
import torch

from inference.signals import summarize, with_chosen


def test_it_summarizes_the_distribution_like_torch():
    logits = torch.randn(500, generator=torch.Generator().manual_seed(0)) * 4
    signals, logprobs = summarize(logits, 3, lambda i: f"<{i}>")
    probs = torch.softmax(logits, -1)
    top = torch.topk(probs, 3)
    assert [a.token_id for a in signals.alternatives] == top.indices.tolist()
    assert signals.alternatives[0].text == f"<{top.indices[0]}>"
    assert signals.top1_prob == pytest.approx(top.values[0].item(), rel=1e-5)
    assert signals.margin == pytest.approx((top.values[0] - top.values[1]).item(), rel=1e-4)
    assert signals.entropy == pytest.approx(-(probs * probs.log()).sum().item(), rel=1e-4)
    chosen = with_chosen(signals, logprobs, 7)
    assert chosen.chosen_prob == pytest.approx(probs[7].item(), rel=1e-4)
    assert chosen.to_dict()["alternatives"][1]["prob"] == signals.alternatives[1].prob
