"""Retraining the task classifier on reviewers' corrections: examples from the corrections,
versions kept in Postgres, and one version enabled at a time, only when its held-out
accuracy reaches the design's production target (88 %). Training, enabling and disabling
are audited, as the learned pause model's are."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils.translation import gettext

from reviewer.lifecycle import audit, task_types
from reviewer.lifecycle.task_types import Example, TaskClassifier
from reviewer.models import TaskClassifierVersion, TaskCorrection

MIN_CORRECTIONS = 200  # the design retrains on 200 new samples
TARGET_ACCURACY = 0.88  # the design's production target
HAN = range(0x4E00, 0xA000)

_fitted: dict[str, TaskClassifier] = {}  # checksum -> classifier, per process


class NotEnoughCorrections(ValueError):
    """Fewer corrected samples than a retraining needs."""


class BelowTarget(ValueError):
    """A version whose held-out accuracy is under the target cannot be enabled."""


def language_of(text: str) -> str:
    """ "zh" when the text has Chinese characters, else "en": the split stratifies by it."""
    return "zh" if any(ord(ch) in HAN for ch in text) else "en"


def corrected_examples() -> list[Example]:
    """Every session a reviewer labelled, as a training example (oldest first, so that a
    retraining's split does not depend on when it ran)."""
    rows = TaskCorrection.objects.select_related("session__domain").order_by("session_id")
    return [
        Example(
            c.session.case_text,  # the words, not the anchor markup
            c.corrected,
            c.session.domain.slug,
            language_of(c.session.case_text),
        )
        for c in rows
    ]


def train(shipped: list[Example], corrected: list[Example]) -> tuple[list[Example], dict[str, Any]]:
    """(every example, the metrics of a model fitted on their training split and measured on
    the held-out one). Refuses fewer than MIN_CORRECTIONS corrected samples."""
    if len(corrected) < MIN_CORRECTIONS:
        raise NotEnoughCorrections(
            f"{len(corrected)} corrected samples; retraining needs at least {MIN_CORRECTIONS}"
        )
    examples = [*shipped, *corrected]
    fit_on, held_out = task_types.split(examples)
    model = TaskClassifier().fit(fit_on)
    result = task_types.evaluate(model, held_out)
    # the combined split's own held-out ones: a split of `corrected` alone counts its groups
    # from zero, and holds out examples the model was fitted on
    mine = {id(example) for example in corrected}
    corrected_held_out = [example for example in held_out if id(example) in mine]
    metrics = {
        "accuracy": result.accuracy,
        "heldout_examples": result.total,
        "train_examples": len(fit_on),
        "shipped_examples": len(shipped),
        "corrected_examples": len(corrected),
        "corrected_heldout_accuracy": task_types.evaluate(model, corrected_held_out).accuracy,
        "confusion": result.confusion,
    }
    return examples, metrics


def to_bytes(examples: list[Example]) -> bytes:
    rows = [[e.text, e.label, e.domain, e.lang] for e in examples]
    return json.dumps(rows, ensure_ascii=False, separators=(",", ":")).encode()


def from_bytes(data: bytes) -> list[Example]:
    return [Example(*row) for row in json.loads(data)]


@transaction.atomic
def store_version(
    examples: list[Example], metrics: dict[str, Any], who: str
) -> TaskClassifierVersion:
    data = to_bytes(examples)
    latest = TaskClassifierVersion.objects.aggregate(v=Max("version"))["v"] or 0
    version = TaskClassifierVersion.objects.create(
        version=latest + 1,
        checksum=hashlib.sha256(data).hexdigest(),
        data=data,
        metrics=metrics,
        created_by=who,
    )
    audit.append("task_classifier_trained", who, None, headline(version))
    return version


def headline(version: TaskClassifierVersion) -> dict[str, Any]:
    keys = ("accuracy", "heldout_examples", "corrected_examples", "corrected_heldout_accuracy")
    figures = {key: version.metrics.get(key) for key in keys}
    return {"version": version.version, "checksum": version.checksum, **figures}


@transaction.atomic
def enable(version: TaskClassifierVersion, who: str) -> None:
    """Make `version` the classifier of new sessions (the others off), if it reaches the
    target; BelowTarget says why not."""
    if version.accuracy < TARGET_ACCURACY:
        message = gettext(
            "task classifier v%(version)s: held-out accuracy %(accuracy)s is below the"
            " %(target)s target; it stays disabled"
        )  # in the active language: the admin shows it as it is
        figures = {"accuracy": f"{version.accuracy:.1%}", "target": f"{TARGET_ACCURACY:.0%}"}
        raise BelowTarget(message % {"version": version.version, **figures})
    _lock_versions(version)
    # The version it replaces is switched off as ``disable`` would: audited, naming its successor.
    others = TaskClassifierVersion.objects.exclude(pk=version.pk).filter(enabled=True)
    for previous in others.defer("data").order_by("version"):
        previous.enabled = False
        previous.save(update_fields=["enabled"])
        replaced = {**headline(previous), "replaced_by": version.version}
        audit.append("task_classifier_disabled", who, None, replaced)
    if not version.enabled:
        version.enabled = True
        version.save(update_fields=["enabled"])
        audit.append("task_classifier_enabled", who, None, headline(version))


@transaction.atomic
def disable(version: TaskClassifierVersion, who: str) -> None:
    """Back to the shipped classifier (or none of this version), audited."""
    _lock_versions(version)
    if version.enabled:
        version.enabled = False
        version.save(update_fields=["enabled"])
        audit.append("task_classifier_disabled", who, None, headline(version))


def _lock_versions(version: TaskClassifierVersion) -> None:
    """One switch at a time: a second enable or disable waits here for the first to commit,
    then reads what it left (``version`` as stored now), so each change is audited once and
    two enables never leave two versions on."""
    list(TaskClassifierVersion.objects.select_for_update().values_list("pk", flat=True))
    version.refresh_from_db(fields=["enabled"])


def active_version() -> TaskClassifierVersion | None:
    return TaskClassifierVersion.objects.filter(enabled=True).order_by("-version").first()


def active_labeller() -> tuple[int, TaskClassifier] | None:
    """The enabled version's number and classifier, fitted once per process; None: use the
    shipped one. Every session's start asks: it reads the version's number and checksum
    alone, and its training data only the first time this process meets that version."""
    found = TaskClassifierVersion.objects.filter(enabled=True).order_by("-version")
    enabled = found.values_list("version", "checksum").first()
    if enabled is None:
        return None
    version, checksum = enabled
    if checksum not in _fitted:
        data = found.filter(checksum=checksum).values_list("data", flat=True).first()
        if data is None:  # disabled since the line above: the shipped classifier, this time
            return None
        _fitted[checksum] = TaskClassifier().fit(from_bytes(bytes(data)))
    return version, _fitted[checksum]


def active_classifier() -> TaskClassifier | None:
    labeller = active_labeller()
    return labeller[1] if labeller is not None else None


def version_in_use() -> int:
    """The number of the version labelling new sessions; 0: the shipped classifier."""
    version = TaskClassifierVersion.objects.filter(enabled=True).aggregate(Max("version"))
    return version["version__max"] or 0


def training_examples() -> list[Example]:
    """What the classifier in use was trained on: the drift check's reference."""
    version = active_version()
    return from_bytes(bytes(version.data)) if version is not None else task_types.load_examples()
