"""Training the learned pause model: labelled examples (the starter set shipped in
data/pause_fragments and a domain's own history), a fixed held-out split, a class-balanced
logistic regression in numpy, and the metrics an admin decides by: held-out precision and
recall, and the pauses per 100 tokens the model would cause.

An example is a moment in a generation: `text_before` was written, then `next_text`, and
the label says whether a reviewer would intervene right after `next_text`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from inference.learned.pause_features import HASH_BITS, Step, features, hashed
from inference.learned.pause_model import PauseModel
from inference.policies.dry_run import simulated_tokens

STARTER_DIR = Path(__file__).resolve().parents[2] / "data" / "pause_fragments"
HELDOUT_BUCKETS = 5  # one example in five is held out, by a stable hash of its key
VALIDATION_FOLDS = 3
DEFAULT_L2 = 1e-3  # by validation on the starter set's training split (ties broken upward)


@dataclass(frozen=True)
class Example:
    text_before: str
    next_text: str
    label: int  # 1: a reviewer would intervene right after next_text
    signals: Mapping[str, Any] | None = (
        None  # the step's Signals.to_dict(), None for hand-labelled text
    )
    domain: str | None = None
    key: str | None = None  # stable id; the split hashes it (else the text)
    # Hand-labelled: no earlier moment of this text is a pause point (GUIDELINE.md, rule 1),
    # so every token boundary before the labelled one is a negative example too.
    earlier_negative: bool = False

    @property
    def step(self) -> Step:
        text = self.text_before + self.next_text
        return Step.from_signals(text, len(self.text_before), self.signals)

    def stable_key(self) -> str:
        return self.key or f"{self.domain}\x00{self.text_before}\x00{self.next_text}"


def load_starter_set(
    directory: Path = STARTER_DIR, domains: Iterable[str] | None = None
) -> list[Example]:
    """The starter set's fragments (see GUIDELINE.md in its directory), of `domains` only
    when given (slugs such as "clinical-note")."""
    wanted = set(domains) if domains is not None else None
    examples = []
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line) if line.strip() else None
            if row is None or (wanted is not None and row["domain"] not in wanted):
                continue
            examples.append(
                Example(
                    row["before"], row["next"], int(row["label"]), None, row["domain"],
                    row["id"], earlier_negative=True,
                )
            )  # fmt: skip
    return examples


def bucket(example: Example, salt: str = "") -> int:
    digest = hashlib.sha256((salt + example.stable_key()).encode()).hexdigest()
    return int(digest[:8], 16) % HELDOUT_BUCKETS


def is_heldout(example: Example) -> bool:
    return bucket(example) == 0


def split(examples: Iterable[Example], salt: str = "") -> tuple[list[Example], list[Example]]:
    """(training, held out): fixed by the examples' keys, whatever their order or number."""
    train: list[Example] = []
    heldout: list[Example] = []
    for example in examples:
        (heldout if bucket(example, salt) == 0 else train).append(example)
    return train, heldout


def earlier_steps(example: Example) -> list[Step]:
    """The moments before the labelled one, at simulated token boundaries, without signals:
    all of text_before's, and next_text's too when the example is negative (a positive's
    unit of risk is only complete at its end, so its inside stays unlabelled)."""
    text = example.text_before + example.next_text
    last = len(text) if example.label == 0 else len(example.text_before)
    steps, end = [], 0
    for piece in simulated_tokens(text):
        end += len(piece)
        if end > last or (end == len(text)):
            break
        if piece.strip():
            steps.append(Step(text[:end], end - len(piece)))
    return steps


def training_rows(examples: Sequence[Example]) -> list[tuple[dict[str, float], int]]:
    rows = [(features(e.step), e.label) for e in examples]
    for example in examples:
        if example.earlier_negative:
            rows += [(features(step), 0) for step in earlier_steps(example)]
    return rows


def fit(
    rows: Sequence[tuple[dict[str, float], int]],
    bits: int = HASH_BITS,
    epochs: int = 300,
    l2: float = 1e-3,
    rate: float = 0.05,
) -> tuple[np.ndarray, float]:
    """Class-balanced L2 logistic regression, full batch with Adam, over sparse rows."""
    row_ids, cols, vals = [], [], []
    for i, (found, _) in enumerate(rows):
        indices, values = hashed(found, bits)
        row_ids += [i] * len(indices)
        cols += indices
        vals += values
    # Only the columns some row uses get a weight while fitting: [used] instead of [2**bits].
    used, c = np.unique(np.array(cols, dtype=np.int64), return_inverse=True)
    r, v = np.array(row_ids), np.array(vals, dtype=np.float64)
    y = np.array([label for _, label in rows], dtype=np.float64)
    positives = min(max(1.0, y.sum()), len(y) - 1.0)
    sample_weight = np.where(y == 1, len(y) / (2 * positives), len(y) / (2 * (len(y) - positives)))
    w, b = np.zeros(len(used)), 0.0
    moments = [np.zeros(len(used)), np.zeros(len(used)), 0.0, 0.0]
    for t in range(1, epochs + 1):
        z = np.bincount(r, weights=v * w[c], minlength=len(y)) + b
        residual = (1.0 / (1.0 + np.exp(-z)) - y) * sample_weight / len(y)
        grad_w = np.bincount(c, weights=v * residual[r], minlength=len(used)) + l2 * w
        w, b = adam_step(w, b, grad_w, float(residual.sum()), moments, t, rate)
    weights = np.zeros(1 << bits, dtype=np.float32)
    np.add.at(weights, used, w.astype(np.float32))
    return weights, float(b)


def adam_step(
    w: np.ndarray,
    b: float,
    grad_w: np.ndarray,
    grad_b: float,
    moments: list[Any],
    t: int,
    rate: float,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
) -> tuple[np.ndarray, float]:
    m_w, v_w, m_b, v_b = moments
    m_w *= beta1
    m_w += (1 - beta1) * grad_w
    v_w *= beta2
    v_w += (1 - beta2) * grad_w**2
    moments[2] = m_b = beta1 * m_b + (1 - beta1) * grad_b
    moments[3] = v_b = beta2 * v_b + (1 - beta2) * grad_b**2
    correct1, correct2 = 1 - beta1**t, 1 - beta2**t
    w = w - rate * (m_w / correct1) / (np.sqrt(v_w / correct2) + eps)
    b = b - rate * (m_b / correct1) / (math.sqrt(v_b / correct2) + eps)
    return w, b


def choose_threshold(scores: Sequence[float], labels: Sequence[int]) -> float:
    """The threshold with the best F1 on validation scores (0.5 when there is nothing to
    choose by); ties go to the higher threshold, which pauses less."""
    best, best_f1 = 0.5, -1.0
    for threshold in sorted(set(round(s, 3) for s in scores)):
        f1 = classification(scores, labels, threshold)["f1"]
        if f1 >= best_f1 and 0.05 <= threshold <= 0.95:
            best, best_f1 = threshold, f1
    return best


def classification(
    scores: Sequence[float], labels: Sequence[int], threshold: float
) -> dict[str, Any]:
    predicted = [s >= threshold for s in scores]
    tp = sum(1 for p, y in zip(predicted, labels, strict=True) if p and y)
    fp = sum(1 for p, y in zip(predicted, labels, strict=True) if p and not y)
    fn = sum(1 for p, y in zip(predicted, labels, strict=True) if not p and y)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "examples": len(labels)}


Session = Sequence[
    tuple[str, Mapping[str, Any] | None]
]  # (token text, its signals or None), in order


def text_session(text: str) -> Session:
    """A text as a session of simulated tokens without signals."""
    return [(piece, None) for piece in simulated_tokens(text)]


def pause_rate(
    model: PauseModel, sessions: Iterable[Session], threshold: float, cooldown: int = 0
) -> tuple[float, int, int]:
    """(pauses per 100 tokens, pauses, tokens) the policy would cause over these sessions,
    replayed token by token with its rising edge and cooldown, as in a real run."""
    pauses = tokens = 0
    for session in sessions:
        text, previous, last = "", None, None
        for position, (piece, signals) in enumerate(session):
            step = Step.from_signals(text + piece, len(text), signals)
            cooling = last is not None and position - last <= cooldown
            if not cooling and model.crossing(step, previous, threshold) is not None:
                pauses, last = pauses + 1, position
            text, previous = step.text, step
        tokens += len(session)
    return (100.0 * pauses / tokens if tokens else 0.0), pauses, tokens


def evaluate(model: PauseModel, examples: Sequence[Example], threshold: float) -> dict[str, Any]:
    """Precision and recall at the examples' moments, overall and per domain and language."""
    scores = [model.score(e.step) for e in examples]
    labels = [e.label for e in examples]
    result = classification(scores, labels, threshold)
    groups: dict[str, list[int]] = {}
    for i, example in enumerate(examples):
        lang = "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in example.step.text) else "en"
        for group in (example.domain or "unknown", lang):
            groups.setdefault(group, []).append(i)
    result["groups"] = {
        name: classification([scores[i] for i in idx], [labels[i] for i in idx], threshold)
        for name, idx in sorted(groups.items())
    }
    return result


def train(
    examples: Sequence[Example],
    *,
    sessions: Sequence[Session] | None = None,
    epochs: int = 300,
    l2: float = DEFAULT_L2,
    threshold: float | None = None,
    info: Mapping[str, Any] | None = None,
) -> PauseModel:
    """Train on the training split of `examples` and measure on its held-out split.

    The threshold (unless given) is the best-F1 one on a validation slice of the training
    split, chosen before the final fit on the whole training split. `sessions` (a domain's
    recent generations) are what pauses per 100 tokens is measured on; without them it is
    measured on the held-out examples' texts. The model's `metrics` say it all.
    """
    train_set, heldout = split(examples)
    if not any(e.label for e in train_set) or all(e.label for e in train_set):
        raise ValueError("training needs both positive and negative examples")
    if threshold is None:
        threshold = validation_threshold(train_set, epochs, l2)
    weights, bias = fit(training_rows(train_set), epochs=epochs, l2=l2)
    model = PauseModel(weights, bias, threshold, info={**(info or {}), **provenance(train_set)})
    model.metrics = measure(model, heldout, sessions, threshold)
    model.metrics["train_examples"] = len(train_set)
    return model


def validation_threshold(train_set: Sequence[Example], epochs: int, l2: float) -> float:
    """Best-F1 threshold over validation scores pooled from VALIDATION_FOLDS fits, each
    leaving out another fifth of the training split (the held-out split is never seen)."""
    scores, labels = [], []
    for fold in range(VALIDATION_FOLDS):
        fitting, validation = split(train_set, salt=f"validation-{fold}")
        if not any(e.label for e in fitting) or all(e.label for e in fitting):
            continue
        weights, bias = fit(training_rows(fitting), epochs=epochs, l2=l2)
        probe = PauseModel(weights, bias, 0.5)
        scores += [probe.score(e.step) for e in validation]
        labels += [e.label for e in validation]
    return choose_threshold(scores, labels) if len(set(labels)) == 2 else 0.5


def measure(
    model: PauseModel,
    heldout: Sequence[Example],
    sessions: Sequence[Session] | None,
    threshold: float,
) -> dict[str, Any]:
    metrics = {**evaluate(model, heldout, threshold), "threshold": threshold}
    metrics["heldout_examples"] = metrics.pop("examples")
    metrics["heldout_positives"] = sum(e.label for e in heldout)
    replay = sessions if sessions is not None else [text_session(e.step.text) for e in heldout]
    rate, pauses, tokens = pause_rate(model, replay, threshold)
    metrics.update(pauses_per_100_tokens=rate, replay_pauses=pauses, replay_tokens=tokens)
    metrics["replayed_on"] = "sessions" if sessions is not None else "heldout_examples"
    return metrics


def provenance(train_set: Sequence[Example]) -> dict[str, Any]:
    domains = sorted({e.domain for e in train_set if e.domain})
    return {"domains": domains, "positives": sum(e.label for e in train_set)}
