"""Retraining the task classifier: its figure for reviewers' corrections is measured on
corrected samples the model was not fitted on."""

from __future__ import annotations

from reviewer.analytics import task_models
from reviewer.lifecycle import task_types
from reviewer.lifecycle.task_types import Example

ASKS = {
    "deterministic": "Look up the rate table entry for applicant {n}.",
    "open": "Write a friendly note to applicant {n} about their cover.",
    "reasoning": "Work out whether applicant {n} qualifies for the lower premium.",
}


def corrected(count: int) -> list[Example]:
    """Samples of the shipped set's "underwriting" domain, half of them labelled against
    their wording, as reviewers' corrections can be."""
    labels = list(ASKS)
    return [
        Example(ASKS[labels[(n // 2) % 3]].format(n=n), labels[n % 3], "underwriting", "en")
        for n in range(count)
    ]


def test_it_measures_the_corrections_on_held_out_samples_only():
    shipped, mine = task_types.load_examples(), corrected(task_models.MIN_CORRECTIONS)
    _, metrics = task_models.train(shipped, mine)
    fit_on, held_out = task_types.split([*shipped, *mine])
    texts = {e.text for e in mine}
    unseen = [e for e in held_out if e.text in texts]
    assert unseen and not {e.text for e in unseen} & {e.text for e in fit_on}
    model = task_types.TaskClassifier().fit(fit_on)
    expected = task_types.evaluate(model, unseen).accuracy
    assert metrics["corrected_heldout_accuracy"] == expected
