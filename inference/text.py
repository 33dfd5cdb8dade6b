"""Token ids -> text, incrementally, with a map from characters back to tokens."""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

REPLACEMENT = "\ufffd"  # a token ending inside a multi-byte character decodes to this


class Tokenizer(Protocol):
    """What the engine uses of a tokenizer; a transformers tokenizer has all of it."""

    @property
    def eos_token_id(self) -> int | None: ...

    def encode(self, text: str, **options: Any) -> list[int]: ...

    def decode(self, token_ids: Sequence[int], **options: Any) -> str: ...

    def apply_chat_template(
        self, conversation: list[Mapping[str, str]], **options: Any
    ) -> Mapping[str, Any]: ...


class TokenTexts:
    """Text of single tokens, decoded once per vocabulary entry (for alternatives, heatmaps)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._cache: dict[int, str] = {}

    def __call__(self, token_id: int) -> str:
        text = self._cache.get(token_id)
        if text is None:
            text = self._tokenizer.decode([token_id], skip_special_tokens=False)
            self._cache[token_id] = text
        return text


class TokenBytes:
    """The bytes each token stands for, as OpenAI's logprobs report them: a token that ends
    inside a multi-byte character has bytes and no text of its own. Byte-level BPE
    vocabularies (GPT-2's, SmolLM's, Qwen's, Llama 3's) spell bytes as printable characters;
    SentencePiece ones have ``<0xNN>`` pieces for bytes. Any other piece: its text's UTF-8."""

    BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._cache: dict[int, bytes] = {}
        self._byte_level = self._spells_bytes()

    def __call__(self, token_id: int) -> bytes:
        found = self._cache.get(token_id)
        if found is None:
            found = self._cache[token_id] = self._bytes_of(token_id)
        return found

    def _piece(self, token_id: int) -> str | None:
        convert = getattr(self._tokenizer, "convert_ids_to_tokens", None)
        piece = convert(token_id) if convert is not None else None
        return piece if isinstance(piece, str) else None

    def _bytes_of(self, token_id: int) -> bytes:
        piece = self._piece(token_id)
        if piece is not None and (byte := self.BYTE_PIECE.fullmatch(piece)):
            return bytes([int(byte[1], 16)])
        decoder = _byte_decoder()
        if piece is not None and self._byte_level and all(c in decoder for c in piece):
            return bytes(decoder[c] for c in piece)
        return self._tokenizer.decode([token_id], skip_special_tokens=False).encode()

    def _spells_bytes(self) -> bool:
        """Whether the vocabulary spells bytes as GPT-2 does: " é" comes back as its bytes."""
        try:
            ids = self._tokenizer.encode(" \u00e9", add_special_tokens=False)
            pieces = [self._piece(i) for i in ids]
            decoder = _byte_decoder()
            spelled = bytes(decoder[c] for p in pieces for c in (p or "\0"))
        except (KeyError, TypeError, ValueError):
            return False
        return spelled == " \u00e9".encode()


@functools.cache
def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable character for each byte, reversed (its ``bytes_to_unicode``)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += range(ord("®"), ord("ÿ") + 1)
    chars = {b: chr(b) for b in printable}
    others = (b for b in range(256) if b not in chars)
    chars |= {b: chr(256 + n) for n, b in enumerate(others)}
    return {c: b for b, c in chars.items()}


@dataclass
class Detokenizer:
    """Generated text kept in step with generated ids.

    Invariant: ``text == decode(ids[:emitted])``. A token that ends inside a multi-byte
    character emits nothing until a later token completes it. ``starts[i]`` is
    ``len(text)`` when token i was appended and ``marks[i]`` the ``emitted`` count then, so
    ``text[:starts[i]] == decode(ids[:marks[i]])``: a clean place to cut for edits.
    """

    ids: list[int] = field(default_factory=list)
    text: str = ""
    emitted: int = 0
    starts: list[int] = field(default_factory=list)
    marks: list[int] = field(default_factory=list)

    WINDOW = 4  # tokens of left context when decoding the newest token

    def append(self, tokenizer: Tokenizer, token_id: int) -> tuple[int, str]:
        """Append one token; returns (char offset where its text starts, its text)."""
        self.ids.append(token_id)
        self.starts.append(len(self.text))
        self.marks.append(self.emitted)
        left = max(0, self.emitted - self.WINDOW)
        prefix = _decode(tokenizer, self.ids[left : self.emitted])
        full = _decode(tokenizer, self.ids[left:])
        if full.endswith(REPLACEMENT) or not full.startswith(prefix):
            return len(self.text), ""
        delta = full[len(prefix) :]
        start = len(self.text)
        self.text += delta
        self.emitted = len(self.ids)
        return start, delta

    def extend(self, tokenizer: Tokenizer, token_ids: list[int]) -> None:
        for token_id in token_ids:
            self.append(tokenizer, token_id)

    def truncate(self, n: int) -> None:
        if n >= len(self.ids):
            return
        self.text = self.text[: self.starts[n]]
        self.emitted = self.marks[n]
        del self.ids[n:], self.starts[n:], self.marks[n:]

    def cut_for_char(self, char: int) -> tuple[int, int]:
        """Latest (token index, char index) with char index <= char and
        ``text[:char index] == decode(ids[:token index])``."""
        if char >= len(self.text):
            return self.emitted, len(self.text)
        i = bisect.bisect_right(self.starts, char) - 1  # last token starting at or before char
        return (self.marks[i], self.starts[i]) if i >= 0 else (0, 0)

    def token_span_chars(self, start: int, end: int) -> tuple[int, int]:
        """Char range covered by tokens [start, end)."""
        first = self.starts[start] if start < len(self.ids) else len(self.text)
        last = self.starts[end] if end < len(self.ids) else len(self.text)
        return first, last

    def pieces(self, start: int = 0) -> list[str]:
        """Text of each token from ``start`` on, as a stream shows it: a token ending inside
        a character shows nothing, the one completing it shows the character."""
        bounds = [*self.starts[start:], len(self.text)]
        return [self.text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "emitted": self.emitted,
            "starts": self.starts,
            "marks": self.marks,
        }

    @classmethod
    def from_dict(cls, ids: list[int], d: dict[str, Any]) -> Detokenizer:
        return cls(list(ids), d["text"], d["emitted"], list(d["starts"]), list(d["marks"]))


def _decode(tokenizer: Tokenizer, ids: list[int]) -> str:
    return tokenizer.decode(ids, skip_special_tokens=True) if ids else ""


def eos_ids(tokenizer: Tokenizer, model: object) -> frozenset[int]:
    """The ids that end a generation: the tokenizer's EOS and the model's configured ones."""
    ids = {tokenizer.eos_token_id}
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids.update(configured if isinstance(configured, list) else [configured])
    return frozenset(i for i in ids if i is not None)


def stop_string_at(text: str, stops: Sequence[str]) -> int | None:
    """Where the first of ``stops`` begins in ``text``; None when it holds none. The run
    stops at the token that completes one; whoever keeps the text cuts it there (the stop
    string is not part of the answer)."""
    found = [i for s in stops if s and (i := text.find(s)) >= 0]
    return min(found) if found else None
