"""Attention at a pause: where the last context position looks, per layer and per head."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from inference.transformers_backend.gate_view import gate_view

if TYPE_CHECKING:
    from inference.state import DecodeState
    from inference.transformers_backend.runner import ModelRunner


@dataclass(frozen=True)
class AttentionView:
    tokens: list[str]  # text of every context position (prompt, notes and generated)
    prompt_length: int  # positions [0, prompt_length) are the prompt
    notes: list[list[int]]  # [start, end) of each note (context the model read, not wrote)
    layers: list[list[float]]  # [L][S]: each layer's row, mean over heads
    layer: int  # the layer ``heads`` belongs to
    heads: list[list[float]]  # [H][S]: that layer's row per head
    gate: dict[str, Any] | None = None  # gated attention: gate_view.py's description; None: full

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def view(
    state: DecodeState, runner: ModelRunner, token_text: Callable[[int], str], layer: int = -1
) -> AttentionView:
    """Where the last context position of ``state`` attends; ``layer`` picks the per-head row."""
    layers = runner.num_layers
    if not isinstance(layer, int) or not -layers <= layer < layers:
        raise ValueError(f"layer must be in [{-layers}, {layers}), not {layer!r}")
    ids = state.context_ids()
    weights = runner.last_token_attention(state.cache, ids[-1])  # [L, H, S]
    return AttentionView(
        tokens=[token_text(i) for i in ids],
        prompt_length=len(state.prompt_ids),
        notes=note_spans(state),
        layers=weights.mean(1).tolist(),
        layer=layer % layers,
        heads=weights[layer].tolist(),
        gate=gate_view(state, runner),
    )


def note_spans(state: DecodeState) -> list[list[int]]:
    """Where each note sits among the context positions (as ``state.context_ids`` lays them
    out), so that a reader can tell the generated positions from the notes between them."""
    spans, at = [], len(state.prompt_ids)
    for index in range(len(state.generated_ids) + 1):
        for note in state.notes:
            if note.at == index:
                spans.append([at, at + len(note.ids)])
                at += len(note.ids)
        at += 1
    return spans


def live_layers(choice: int | str | None, layers: int) -> set[int] | None:
    """The layers a live attention row averages: "mean" for all ``layers``, or one layer
    (negative counts from the last); None leaves live attention off."""
    if choice is None:
        return None
    if choice == "mean":
        return set(range(layers))
    if isinstance(choice, int) and -layers <= choice < layers:
        return {choice % layers}
    raise ValueError(f'live_attention must be "mean" or a layer in [0, {layers}), not {choice!r}')
