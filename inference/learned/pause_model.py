"""The learned pause model: a logistic regression over hashed step features, its score
and explanation for one step, and its versioned, checksummed file format.

File format (``to_bytes``): a magic line, a 4-byte big-endian header length, a JSON header
(format, feature version, hash bits, bias, threshold, metrics, provenance), the
zlib-compressed non-zero weights (uint32 indices then float32 values, little-endian), and
a SHA-256 of everything before it. The checksum of a model is the SHA-256 of its bytes, so
a policy spec can pin the exact model it was tested with.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import struct
import threading
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from inference.learned.pause_features import (
    FEATURE_VERSION,
    HASH_BITS,
    Step,
    describe,
    features,
    hashed,
    prior_step,
)

MAGIC = b"CAESURA-PAUSE-MODEL\n"
FORMAT_VERSION = 1
MAX_MODEL_BYTES = 64 * 1024 * 1024


class PauseModelError(ValueError):
    """A model file is missing, corrupt, of another version or not the one a spec pinned."""


@dataclass
class PauseModel:
    weights: np.ndarray  # [2**bits] float32, mostly zero
    bias: float
    threshold: float  # default decision threshold, chosen at training time
    bits: int = HASH_BITS
    metrics: dict[str, Any] = field(
        default_factory=dict
    )  # held-out precision, recall, pauses/100 tokens
    info: dict[str, Any] = field(
        default_factory=dict
    )  # provenance: domains, example counts, options

    def score(self, step: Step) -> float:
        """Probability that a reviewer would intervene at this step."""
        return self.probability(features(step))

    def probability(self, found: dict[str, float]) -> float:
        indices, values = hashed(found, self.bits)
        z = self.bias + float(np.dot(self.weights[indices], values))
        return 1.0 / (1.0 + math.exp(-z)) if z > -60 else 0.0

    def explain(self, found: dict[str, float], k: int = 3) -> list[tuple[str, float]]:
        """The k named features that pushed the score up most, with their contributions."""
        indices, values = hashed(found, self.bits)
        contributions = self.weights[indices] * np.asarray(values, dtype=np.float32)
        ranked = sorted(zip(found, contributions.tolist(), strict=True), key=lambda c: -c[1])
        return [(name, c) for name, c in ranked if c > 0 and name != "bias"][:k]

    @staticmethod
    def reason_text(explained: list[tuple[str, float]]) -> str:
        labels = list(dict.fromkeys(describe(name) for name, _ in explained))
        return ", ".join(labels) or "its overall pattern"

    def to_bytes(self) -> bytes:
        header = {
            "format": FORMAT_VERSION,
            "feature_version": FEATURE_VERSION,
            "bits": self.bits,
            "bias": self.bias,
            "threshold": self.threshold,
            "metrics": self.metrics,
            "info": self.info,
        }
        head = json.dumps(header, sort_keys=True, ensure_ascii=False).encode()
        nonzero = np.flatnonzero(self.weights).astype("<u4")
        values = self.weights[nonzero].astype("<f4")
        body = zlib.compress(nonzero.tobytes() + values.tobytes(), 9)
        data = MAGIC + struct.pack(">I", len(head)) + head + body
        return data + hashlib.sha256(data).digest()

    @functools.cached_property
    def checksum(self) -> str:
        """SHA-256 of `to_bytes()`; computed once, so set metrics before reading it."""
        return hashlib.sha256(self.to_bytes()).hexdigest()

    @classmethod
    def from_bytes(cls, data: bytes) -> PauseModel:
        """The model in `data`; PauseModelError says why it cannot be used."""
        if not data.startswith(MAGIC):
            raise PauseModelError("not a Caesura pause model file")
        payload, digest = data[:-32], data[-32:]
        if len(data) < len(MAGIC) + 36 or hashlib.sha256(payload).digest() != digest:
            raise PauseModelError("the pause model file is truncated or corrupt")
        try:
            return cls.parse(payload)
        except (ValueError, KeyError, TypeError, IndexError, struct.error, zlib.error) as err:
            if isinstance(err, PauseModelError):
                raise
            raise PauseModelError(f"the pause model file is malformed: {err}") from None

    @classmethod
    def parse(cls, payload: bytes) -> PauseModel:
        offset = len(MAGIC) + 4
        (head_len,) = struct.unpack(">I", payload[len(MAGIC) : offset])
        header = json.loads(payload[offset : offset + head_len])
        check_header(header)
        weights = np.zeros(1 << header["bits"], dtype=np.float32)
        raw = zlib.decompress(payload[offset + head_len :])
        count = len(raw) // 8
        indices = np.frombuffer(raw[: 4 * count], dtype="<u4")
        weights[indices] = np.frombuffer(raw[4 * count : 8 * count], dtype="<f4")
        return cls(
            weights=weights,
            bias=float(header["bias"]),
            threshold=float(header["threshold"]),
            bits=header["bits"],
            metrics=header.get("metrics", {}),
            info=header.get("info", {}),
        )

    def crossing(
        self, step: Step, previous: Step | None, threshold: float
    ) -> tuple[float, dict[str, float]] | None:
        """(score, features) when the score rises to the threshold at this step, else None.

        Rising edge: a clause that stays risky over several tokens pauses once, at the token
        that made it risky, not at every token after it. A step that ends inside a number
        is never judged (tokenizers write "500" digit by digit): the pause waits for the
        whole figure, and the step after it is compared with the last settled one, found
        by walking `previous` back over the figure (`last_settled`), so "definitely 5|00|
        mg" pauses at "definitely" only.
        """
        if unsettled(step.text):
            return None
        found = features(step)
        score = self.probability(found)
        if score < threshold:
            return None
        before = last_settled(previous)
        if before is not None and self.score(before) >= threshold:
            return None  # already risky at the last settled step: the pause was there
        return score, found


_UNSETTLED = re.compile(r"\d[.,]?$")
_FIGURE_CHAR = re.compile(r"[\d.,]")


def unsettled(text: str, end: int | None = None) -> bool:
    """Whether the text (up to `end`) may end inside a number that the next token continues."""
    end = len(text) if end is None else end
    return _UNSETTLED.search(text, max(0, end - 3), end) is not None


def last_settled(step: Step | None) -> Step | None:
    """The latest settled step at or before `step`; None when there is none.

    A settled step is itself. An unsettled one is walked back over the figure it ends in
    (digits, decimal and thousands marks) and the whitespace before it, as often as the
    text before is unsettled too ("1, 2, 3"); what remains stands in for the step that
    ended there, as `prior_step` builds it. The token boundaries and signals of that step
    are not known here (neither the live policy nor a replay of text keeps them), so it is
    scored without signals, which the features treat as neutral. Whoever asks, the live
    policy or the training metric (`pause_training.pause_rate`), gets the same step.
    """
    if step is None or not unsettled(step.text):
        return step
    text, end = step.text, len(step.text)
    while end and unsettled(text, end):
        while end and _FIGURE_CHAR.match(text, end - 1):
            end -= 1
        while end and text[end - 1].isspace():
            end -= 1
    return prior_step(text[:end]) if end else None


def check_header(header: dict[str, Any]) -> None:
    if header.get("format") != FORMAT_VERSION:
        raise PauseModelError(
            f"pause model format {header.get('format')!r} is not {FORMAT_VERSION}: retrain it"
        )
    if header.get("feature_version") != FEATURE_VERSION:
        raise PauseModelError(
            f"pause model was trained on features version {header.get('feature_version')!r}, "
            f"this engine computes version {FEATURE_VERSION}: retrain it"
        )
    if not isinstance(header.get("bits"), int) or not 8 <= header["bits"] <= 24:
        raise PauseModelError("pause model header has an invalid hash size")


_CACHE_SIZE = 16  # models per process; a retrained domain model replaces its old version
_cache: dict[tuple[str, str], PauseModel] = {}
_cache_lock = threading.Lock()


def load_model(path: str | Path, checksum: str | None = None) -> PauseModel:
    """The model stored at `path`, verified against `checksum` (SHA-256 hex) when given.

    Loaded once per process and content: every session of a domain shares one model, and
    a file replaced under the same path is read again (its checksum differs).
    """
    path = Path(path)
    try:
        if path.stat().st_size > MAX_MODEL_BYTES:
            raise PauseModelError(f"pause model file {path} is larger than {MAX_MODEL_BYTES} bytes")
        data = path.read_bytes()
    except OSError as err:
        raise PauseModelError(f"cannot read pause model file {path}: {err.strerror}") from None
    actual = hashlib.sha256(data).hexdigest()
    if checksum is not None and actual != checksum.lower():
        raise PauseModelError(
            f"pause model file {path} has checksum {actual[:12]}…, not {checksum[:12]}…"
        )
    key = (str(path.resolve()), actual)
    with _cache_lock:
        if key not in _cache:
            if len(_cache) >= _CACHE_SIZE:
                del _cache[next(iter(_cache))]  # the oldest loaded
            _cache[key] = PauseModel.from_bytes(data)
        return _cache[key]


def save_model(model: PauseModel, directory: str | Path) -> Path:
    """Write the model under its checksum; see `store_model_bytes`."""
    return store_model_bytes(model.to_bytes(), directory)


def store_model_bytes(data: bytes, directory: str | Path) -> Path:
    """Check `data` is a usable model and write it as ``<directory>/<sha256>.pausemodel``.

    Content-addressed, so a worker can materialise a model kept elsewhere (a database
    row) before building a policy that names it, and two versions never overwrite each
    other. Returns the path; an existing identical file is left as it is.
    """
    PauseModel.from_bytes(data)
    path = Path(directory) / f"{hashlib.sha256(data).hexdigest()}.pausemodel"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        tmp = path.with_suffix(f".{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return path
