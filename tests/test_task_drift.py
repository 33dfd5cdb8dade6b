"""The task classifier's drift test: a two-sample KS test (numpy) of recent texts' features
against its training set's, p < 0.01 as in the design; caught on a shifted set of prompts,
silent on an unshifted one."""

from __future__ import annotations

import numpy as np
import pytest

from reviewer.analytics import task_watch
from reviewer.analytics.ks_test import kolmogorov_tail, ks_2samp, ks_statistic
from reviewer.lifecycle import task_types

# Requests from a domain the shipped set never saw: software operations.
SUBJECTS = [
    "the login service", "our billing API", "the Kubernetes cluster", "the mobile app's crash",
    "the nightly backup job", "a slow SQL query", "the CI pipeline", "the payment webhook",
]  # fmt: skip
ASKS = [
    "Write a postmortem for {}.", "Why does {} time out under load?",
    "List the config keys of {}.", "Draft release notes for {}.", "Explain how to debug {}.",
]  # fmt: skip
SHIFTED = [ask.format(subject) for subject in SUBJECTS for ask in ASKS]


@pytest.fixture(scope="module")
def split_set():
    """(classifier, reference features) of the training split, and the held-out texts: new
    prompts of the same kinds, never trained on."""
    train, held_out = task_types.split(task_types.load_examples())
    model = task_types.TaskClassifier().fit(train)
    return model, task_watch.reference_features(train), [e.text for e in held_out]


def test_it_measures_the_largest_gap_between_two_distributions():
    assert ks_statistic([1, 2, 3, 4], [1, 2, 3, 4]) == 0
    assert ks_statistic([1, 2], [3, 4]) == 1
    assert ks_statistic([1, 2, 3, 4], [3, 4, 5, 6]) == pytest.approx(0.5)


def test_it_gives_the_kolmogorov_distributions_critical_values():
    assert kolmogorov_tail(1.358) == pytest.approx(0.05, abs=0.001)
    assert kolmogorov_tail(1.628) == pytest.approx(0.01, abs=0.0005)
    assert kolmogorov_tail(0.1) == 1.0


def test_it_rarely_calls_two_samples_of_one_distribution_different():
    rng = np.random.default_rng(7)
    p_values = [ks_2samp(rng.normal(size=300), rng.normal(size=200)).p_value for _ in range(300)]
    assert np.mean(np.array(p_values) < 0.01) <= 0.02  # about 1 % by construction
    shifted = [ks_2samp(rng.normal(size=300), rng.normal(0.5, size=200)).p_value for _ in range(20)]
    assert max(shifted) < 0.01


def test_it_refuses_an_empty_sample():
    with pytest.raises(ValueError, match="at least one value"):
        ks_2samp([], [1.0])


def test_it_finds_no_drift_in_prompts_like_its_training_set(split_set):
    model, reference, held_out = split_set
    drift = task_watch.compare(model, reference, held_out)
    assert drift.enough and not drift.drifted
    assert drift.min_p > 0.05, {n: t.p_value for n, t in drift.tests.items()}


def test_it_detects_drift_in_prompts_from_a_domain_it_never_saw(split_set):
    model, reference, _ = split_set
    drift = task_watch.compare(model, reference, SHIFTED)
    assert drift.drifted
    assert drift.tests["known_share"].p_value < 0.01
    assert drift.tests["confidence"].p_value < 0.01


def test_it_detects_drift_when_reviewers_paste_whole_documents(split_set):
    model, reference, held_out = split_set
    pasted = [f"{text}\n\n{text} {text} {text} {text}" for text in held_out]
    drift = task_watch.compare(model, reference, pasted)
    assert drift.drifted and drift.tests["log_length"].p_value < 0.01


def test_it_gives_no_verdict_below_thirty_recent_texts(split_set):
    model, reference, _ = split_set
    drift = task_watch.compare(model, reference, SHIFTED[: task_watch.MIN_RECENT - 1])
    assert not drift.enough and not drift.drifted and drift.tests == {}


def test_its_confidence_is_spread_not_pinned_at_one(split_set):
    model, _, held_out = split_set
    confidences = [model.confidence(text) for text in held_out]
    assert min(confidences) >= 1 / 3 and max(confidences) <= 1
    assert np.percentile(confidences, 75) < 0.99  # a plain posterior would be 1.0 here
