"""The dashboard's task classifier card: live accuracy against the target, the drift test per
feature, the classifier in use and how close a retraining is, in words."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from reviewer.analytics import task_models, task_watch
from reviewer.models import TaskCorrection

FEATURE_LABELS = {
    "confidence": gettext_lazy("classifier's confidence"),
    "known_share": gettext_lazy("share of known n-grams"),
    "log_length": gettext_lazy("text length"),
}


def task_card() -> dict[str, Any]:
    accuracy = task_watch.accuracy_window()
    drift = task_watch.drift_check()
    corrections = TaskCorrection.objects.count()
    return {
        "accuracy": accuracy_line(accuracy),
        "below_target": accuracy.below_target,
        "drift": drift_line(drift),
        "drifted": drift.drifted,
        "tests": [
            {
                "feature": str(FEATURE_LABELS[name]),
                "key": name,
                "statistic": f"{test.statistic:.3f}",
                "p_value": p_shown(test.p_value),
                "drifted": test.p_value < task_watch.ALPHA,
            }
            for name, test in drift.tests.items()
        ],
        "model": model_line(),
        "corrections": _("%(n)d sessions labelled by reviewers (a retraining needs %(min)d).")
        % {"n": corrections, "min": task_models.MIN_CORRECTIONS},
        "retrain": drift.drifted and accuracy.below_target,
    }


def accuracy_line(accuracy: task_watch.Accuracy) -> str:
    if accuracy.accuracy is None:
        return _("No session the classifier in use labelled has been judged by a reviewer yet.")
    return _(
        "%(accuracy).0f %% of the last %(judged)d judged sessions the classifier in use "
        "labelled kept their task type (%(corrected)d corrected); target %(target).0f %%."
    ) % {
        "accuracy": accuracy.accuracy * 100,
        "judged": accuracy.judged,
        "corrected": accuracy.corrected,
        "target": accuracy.target * 100,
    }


def drift_line(drift: task_watch.Drift) -> str:
    if not drift.enough:
        return _("Not tested: %(n)d recent sessions; the test needs %(min)d.") % {
            "n": drift.recent,
            "min": task_watch.MIN_RECENT,
        }
    if drift.drifted:
        moved = [
            str(FEATURE_LABELS[n]) for n, t in drift.tests.items() if t.p_value < task_watch.ALPHA
        ]
        return _(
            "Drift: the last %(n)d sessions differ from the training set in %(features)s "
            "(KS test p < 0.01)."
        ) % {"n": drift.recent, "features": _(", ").join(moved)}
    return _("No drift over the last %(n)d sessions (smallest p-value %(p).3f).") % {
        "n": drift.recent,
        "p": drift.min_p or 0.0,
    }


def p_shown(p_value: float) -> str:
    return "< 0.0001" if p_value < 0.0001 else f"{p_value:.4f}"


def model_line() -> str:
    version = task_models.active_version()
    if version is None:
        return _("In use: the classifier of the shipped examples.")
    return _("In use: retrained version %(v)d (held-out accuracy %(a).0f %%).") % {
        "v": version.version,
        "a": version.accuracy * 100,
    }
