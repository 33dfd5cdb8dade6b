"""Task types: label a request deterministic, open or reasoning, and pick its decoding.

The classifier is a multinomial naive Bayes over character n-grams (which cover Chinese,
where there are no spaces) and English word uni/bigrams, trained in a few milliseconds
from the labelled prompts in data/task_prompts.csv. Pure Python: classifying one prompt
is a few hundred dictionary lookups, well under a millisecond.
"""

from __future__ import annotations

import csv
import functools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference.config import TASK_PRESETS
from inference.policies import with_task_presets

if TYPE_CHECKING:
    from reviewer.models import Domain

LABELS = ("deterministic", "open", "reasoning")
DATA_FILE = Path(__file__).resolve().parents[2] / "data" / "task_prompts.csv"
HELD_OUT_EVERY = 5  # every fifth example of each (label, domain, language) group is held out
CHAR_NGRAMS = (1, 2, 3, 4)
SMOOTHING = 1.0
WORD = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")


@dataclass(frozen=True)
class Example:
    text: str
    label: str
    domain: str = ""
    lang: str = ""


def features(text: str) -> Counter[str]:
    """Character 1-4 grams of the normalized text plus English word uni- and bigrams."""
    norm = " " + " ".join(text.lower().split()) + " "
    grams: Counter[str] = Counter()
    for n in CHAR_NGRAMS:
        grams.update("c:" + norm[i : i + n] for i in range(len(norm) - n + 1))
    words = WORD.findall(norm)
    grams.update("w:" + w for w in words)
    grams.update(f"b:{a}_{b}" for a, b in zip(words, words[1:], strict=False))
    return grams


class TaskClassifier:
    """Multinomial naive Bayes with add-alpha smoothing; log-probabilities precomputed."""

    def __init__(self, alpha: float = SMOOTHING) -> None:
        self.alpha = alpha
        self.log_prior: dict[str, float] = {}
        self.log_prob: dict[str, dict[str, float]] = {}
        self.log_unseen: dict[str, float] = {}

    def fit(self, examples: Sequence[Example]) -> TaskClassifier:
        counts: dict[str, Counter[str]] = defaultdict(Counter)
        per_label = Counter(e.label for e in examples)
        for example in examples:
            counts[example.label].update(features(example.text))
        vocabulary = set().union(*counts.values())
        for label in per_label:
            total = sum(counts[label].values()) + self.alpha * len(vocabulary)
            self.log_prior[label] = math.log(per_label[label] / len(examples))
            self.log_prob[label] = {
                g: math.log((c + self.alpha) / total) for g, c in counts[label].items()
            }
            self.log_unseen[label] = math.log(self.alpha / total)
        self.vocabulary = vocabulary
        return self

    def scores(self, text: str) -> dict[str, float]:
        grams = [(g, c) for g, c in features(text).items() if g in self.vocabulary]
        return {
            label: prior
            + sum(c * self.log_prob[label].get(g, self.log_unseen[label]) for g, c in grams)
            for label, prior in self.log_prior.items()
        }

    def predict(self, text: str) -> str:
        scores = self.scores(text)
        return max(scores, key=scores.__getitem__)

    def known_grams(self, text: str) -> tuple[int, int]:
        """(n-grams of the text the classifier has seen, all its n-grams)."""
        grams = features(text)
        return sum(c for g, c in grams.items() if g in self.vocabulary), sum(grams.values())

    def confidence(self, text: str) -> float:
        """The top label's posterior with the scores averaged per known n-gram. Naive Bayes
        multiplies one likelihood per n-gram, so its plain posterior reads 1.0 for almost
        any text of a sentence or more; per n-gram it keeps the spread drift is seen in."""
        known, _ = self.known_grams(text)
        scaled = [s / max(known, 1) for s in self.scores(text).values()]
        top = max(scaled)
        return 1.0 / math.fsum(math.exp(s - top) for s in scaled)


# --- data ----------------------------------------------------------------------------------


def load_examples(path: Path = DATA_FILE) -> list[Example]:
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    examples = [
        Example(r["text"], r["label"], r.get("domain", ""), r.get("lang", "")) for r in rows
    ]
    unknown = {e.label for e in examples} - set(LABELS)
    if unknown:
        raise ValueError(f"{path}: unknown label(s) {sorted(unknown)}; use one of {LABELS}")
    return examples


def split(examples: Sequence[Example]) -> tuple[list[Example], list[Example]]:
    """A fixed, stratified split: the same examples are held out on every machine."""
    train: list[Example] = []
    held_out: list[Example] = []
    seen: Counter[tuple[str, str, str]] = Counter()
    for example in examples:
        group = (example.label, example.domain, example.lang)
        seen[group] += 1
        (held_out if seen[group] % HELD_OUT_EVERY == 0 else train).append(example)
    return train, held_out


@dataclass(frozen=True)
class Evaluation:
    accuracy: float
    confusion: dict[str, dict[str, int]]  # confusion[true][predicted]
    total: int
    mistakes: list[tuple[Example, str]]


def evaluate(classifier: TaskClassifier, examples: Iterable[Example]) -> Evaluation:
    confusion = {t: dict.fromkeys(LABELS, 0) for t in LABELS}
    mistakes = []
    for example in examples:
        predicted = classifier.predict(example.text)
        confusion[example.label][predicted] += 1
        if predicted != example.label:
            mistakes.append((example, predicted))
    total = sum(sum(row.values()) for row in confusion.values())
    correct = sum(confusion[label][label] for label in LABELS)
    return Evaluation(correct / total if total else 0.0, confusion, total, mistakes)


@functools.cache
def shipped_classifier() -> TaskClassifier:
    """The classifier of the shipped examples, trained once per process on every one."""
    return TaskClassifier().fit(load_examples())


SHIPPED_VERSION = 0  # the version number the shipped classifier labels as


def labeller() -> tuple[int, TaskClassifier]:
    """The classifier used at session start and its version: the enabled retrained version
    (reviewer/analytics/task_models.py), else the shipped one."""
    from reviewer.analytics import task_models

    return task_models.active_labeller() or (SHIPPED_VERSION, shipped_classifier())


def classifier() -> TaskClassifier:
    return labeller()[1]


def classify(text: str) -> str:
    return classifier().predict(text)


# --- decoding per task type ------------------------------------------------------------------


def preset_for(domain: Domain, task_type: str) -> dict[str, Any]:
    """The built-in preset for a task type with the domain's admin overrides on top."""
    from reviewer.models import TaskDecoding

    override = TaskDecoding.objects.filter(domain=domain, task_type=task_type).first()
    return {**TASK_PRESETS[task_type], **(override.params if override else {})}


def policy_specs_for(domain: Domain, task_type: str) -> list[dict[str, Any]]:
    """The domain's enabled policies as a new session keeps them: a drift policy whose
    thresholds go "by task type" takes this task type's preset."""
    specs = [p.to_spec() for p in domain.policies.filter(enabled=True)]
    return with_task_presets(specs, task_type)


def check_task_type(task_type: str) -> str:
    if task_type not in LABELS:
        raise ValueError(f"task_type must be one of {', '.join(LABELS)}, not {task_type!r}")
    return task_type


def choose(text: str, override: str | None = None) -> tuple[str, str]:
    """(task type, where it came from): the reviewer's override, else the classifier's label."""
    task, source, _version = label(text, override)
    return task, source


def label(text: str, override: str | None = None) -> tuple[str, str, int | None]:
    """As ``choose``, and the version of the classifier that labelled it (None: overridden)."""
    if override not in (None, ""):
        return check_task_type(override), "override", None
    version, model = labeller()
    return model.predict(text), "classifier", version
