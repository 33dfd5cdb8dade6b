"""What the worker asks of its engine, as its own threads see it (every call runs in the
serving loop: ``inference.serving.Served``): the backend contract, the edits at a pause and
the views of a paused state. Both backends provide these; ``runner`` is read only where the
backend declares live attention (the transformers engine)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from inference.backend import Backend

if TYPE_CHECKING:
    from inference.edits import EditResult
    from inference.state import DecodeState, Note
    from inference.transformers_backend.attention import AttentionView
    from inference.transformers_backend.lookahead import Branch


class ServedEngine(Backend, Protocol):
    runner: Any  # the transformers engine's ModelRunner

    def add_note(self, state: DecodeState, text: str) -> Note: ...

    def attention(self, state: DecodeState, layer: int = -1) -> AttentionView: ...

    def look_ahead(
        self, state: DecodeState, token_ids: list[int], steps: int = 5
    ) -> list[Branch]: ...

    def replace_text(self, state: DecodeState, start: int, end: int, text: str) -> EditResult: ...

    def choose_alternative(
        self, state: DecodeState, token_id: int, position: int | None = None
    ) -> EditResult: ...

    def truncate(self, state: DecodeState, position: int) -> EditResult: ...

    def append_text(self, state: DecodeState, text: str) -> EditResult: ...
