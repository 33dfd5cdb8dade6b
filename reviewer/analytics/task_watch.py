"""The task classifier watching itself: its live accuracy from reviewers' corrections over a
sliding window, and drift of what it is asked to label, by a two-sample KS test of recent
sessions' features against its training set's (p < 0.01 is drift, as in the design).

Accuracy: of the most recent sessions the classifier in use labelled (its version is kept
with each) that a reviewer judged, the share whose label stood. A session is judged when a
reviewer corrected (or confirmed) its task type, or decided it (approved or rejected) without
correcting it: a reviewer who read the whole text and let the label stand is taken to agree
with it. A generation the system approved unread (its
decision audited with the actor "system") was judged by nobody.

Drift: three features per text, each its own KS test: the classifier's confidence (its
per-n-gram posterior, ``TaskClassifier.confidence``), the share of the text's n-grams it has
seen in training, and the text's length (log characters). The training set's values are
measured out of fold (each example by a model fitted without it), so that they are what an
unseen text of the same kind would give, not a model's view of its own training data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Exists, OuterRef, Q

from reviewer.analytics import task_models
from reviewer.analytics.ks_test import KsResult, ks_2samp
from reviewer.lifecycle import task_types
from reviewer.lifecycle.gate import case_text
from reviewer.lifecycle.gateway import SYSTEM_ACTOR
from reviewer.lifecycle.task_types import Example, TaskClassifier
from reviewer.models import AuditRecord, ReviewSession, statuses

ACCURACY_WINDOW = 100  # judged sessions
DRIFT_WINDOW = 200  # recent sessions whose texts are compared with the training set
MIN_RECENT = 30  # below this a KS test says little: no verdict
ALPHA = 0.01  # the design's threshold
FOLDS = 5
FEATURES = ("confidence", "known_share", "log_length")
DECIDED = (statuses.COMPLETED, statuses.REJECTED)
DECISIONS = ("approve", "reject")  # their audit actions

Row = tuple[float, float, float]  # one text's features, in FEATURES order
_reference: dict[tuple[int, int], dict[str, Row]] = {}  # per training set, per process


@dataclass(frozen=True)
class Accuracy:
    judged: int  # sessions in the window
    corrected: int  # of them, those whose label a reviewer changed
    version: int = task_types.SHIPPED_VERSION  # the classifier they were labelled by
    target: float = task_models.TARGET_ACCURACY

    @property
    def accuracy(self) -> float | None:
        return (self.judged - self.corrected) / self.judged if self.judged else None

    @property
    def below_target(self) -> bool:
        return self.accuracy is not None and self.accuracy < self.target


@dataclass(frozen=True)
class Drift:
    tests: dict[str, KsResult]  # feature -> its test; empty below MIN_RECENT
    recent: int

    @property
    def enough(self) -> bool:
        return self.recent >= MIN_RECENT

    @property
    def drifted(self) -> bool:
        return self.enough and any(t.p_value < ALPHA for t in self.tests.values())

    @property
    def min_p(self) -> float | None:
        return min((t.p_value for t in self.tests.values()), default=None)


# --- accuracy -------------------------------------------------------------------------------


def accuracy_window(size: int = ACCURACY_WINDOW) -> Accuracy:
    version = task_models.version_in_use()
    # The system approves unread text: that says nothing of its label.
    by_system = AuditRecord.objects.filter(
        session=OuterRef("pk"), action__in=DECISIONS, actor=SYSTEM_ACTOR
    )
    decided = Q(status__in=DECIDED) & ~Exists(by_system)
    # The version in use alone: an earlier one's mistakes are not this one's.
    labelled = {"task_source": "classifier", "task_classifier_version": version}
    judged = (
        ReviewSession.objects.filter(**labelled)
        .filter(Q(task_correction__isnull=False) | decided)
        .order_by("-id")
        .values_list("task_type", "task_correction__corrected")[:size]
    )
    rows = list(judged)
    corrected = sum(1 for given, label in rows if label is not None and label != given)
    return Accuracy(len(rows), corrected, version)


# --- drift ----------------------------------------------------------------------------------


def text_features(model: TaskClassifier, text: str) -> tuple[float, float, float]:
    known, total = model.known_grams(text)
    return model.confidence(text), known / max(total, 1), math.log1p(len(text))


def columns(rows: Sequence[Row]) -> dict[str, list[float]]:
    return {name: [row[i] for row in rows] for i, name in enumerate(FEATURES)}


def out_of_fold(examples: Sequence[Example]) -> dict[str, Row]:
    """Each training text's features under a model fitted on the other folds."""
    rows: dict[str, Row] = {}
    for fold in range(FOLDS):
        model = TaskClassifier().fit([e for i, e in enumerate(examples) if i % FOLDS != fold])
        rows |= {e.text: text_features(model, e.text) for e in examples[fold::FOLDS]}
    return rows


def reference_features(examples: Sequence[Example]) -> dict[str, list[float]]:
    return columns(list(out_of_fold(examples).values()))


def compare(
    model: TaskClassifier,
    reference: dict[str, list[float]],
    texts: Sequence[str],
    seen: dict[str, Row] | None = None,
) -> Drift:
    """The KS test of each feature of `texts` against the reference's. A text the model was
    trained on (a corrected session, after a retraining) is measured out of fold, from
    `seen`, as the reference is: in sample it would look more familiar than new text does."""
    if len(texts) < MIN_RECENT:
        return Drift({}, len(texts))
    known = seen or {}
    recent = columns([known.get(text) or text_features(model, text) for text in texts])
    return Drift({name: ks_2samp(reference[name], recent[name]) for name in FEATURES}, len(texts))


def recent_texts(size: int = DRIFT_WINDOW) -> list[str]:
    """The input texts of the most recent sessions, whoever chose their task type: drift is
    in what arrives, and the classifier's confidence is measured on each all the same."""
    texts = ReviewSession.objects.order_by("-id").values_list("input_text", flat=True)[:size]
    return [case_text(text)[0] for text in texts]  # the words, not the anchor markup


def drift_check(size: int = DRIFT_WINDOW) -> Drift:
    examples = task_models.training_examples()
    key = (len(examples), hash(tuple((e.text, e.label) for e in examples)))
    if key not in _reference:
        _reference.clear()  # only the classifier in use matters
        _reference[key] = out_of_fold(examples)
    seen = _reference[key]
    reference = columns(list(seen.values()))
    return compare(task_types.classifier(), reference, recent_texts(size), seen)
