"""Training the learned pause policy: the starter set, its fixed split, held-out metrics,
a domain's history with signals, and the pauses it would cause."""

from __future__ import annotations

import collections
import json

import pytest

from inference.learned.pause_model import PauseModel
from inference.learned.pause_training import (
    STARTER_DIR,
    Example,
    earlier_steps,
    is_heldout,
    load_starter_set,
    pause_rate,
    split,
    text_session,
    train,
)
from tests.inference.pause_models import starter_model

DOMAINS = {"clinical-note", "contract-review", "underwriting", "patent-claims"}


def test_the_starter_set_covers_every_demo_domain_in_both_languages():
    examples = load_starter_set()
    assert len(examples) >= 600
    counts = collections.Counter((e.domain, "zh" if e.key.split("-")[1] == "zh" else "en")
                                 for e in examples)  # fmt: skip
    assert {domain for domain, _ in counts} == DOMAINS
    assert all(counts[(domain, lang)] >= 75 for domain in DOMAINS for lang in ("en", "zh"))
    assert 0.4 < sum(e.label for e in examples) / len(examples) < 0.6
    assert len({e.key for e in examples}) == len(examples)
    assert (STARTER_DIR / "GUIDELINE.md").is_file()
    clinical = load_starter_set(domains=["clinical-note"])
    assert {e.domain for e in clinical} == {"clinical-note"} and len(clinical) == sum(
        1 for e in examples if e.domain == "clinical-note"
    )


def test_every_fragment_names_a_cue_the_guideline_defines():
    guideline = (STARTER_DIR / "GUIDELINE.md").read_text(encoding="utf-8")
    for path in STARTER_DIR.glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            assert f"| `{row['cue']}` |" in guideline, row["id"]
            assert row["next"].strip() and row["label"] in (0, 1), row["id"]


def test_the_held_out_split_is_fixed_by_the_ids():
    examples = load_starter_set()
    train_set, heldout = split(examples)
    assert split(list(reversed(examples)))[1] == list(reversed(heldout))
    assert 0.15 < len(heldout) / len(examples) < 0.25
    assert [e.key for e in heldout][:3] == ["cn-en-002", "cn-en-003", "cn-en-008"]
    assert not {e.key for e in train_set} & {e.key for e in heldout}
    assert is_heldout(heldout[0]) and not is_heldout(train_set[0])


def test_earlier_moments_of_a_labelled_text_are_negatives():
    positive = Example("Increase furosemide to", " 40 mg", 1, earlier_negative=True)
    assert [s.text for s in earlier_steps(positive)] == [
        "Increase", "Increase furosemide", "Increase furosemide to",
    ]  # fmt: skip
    negative = Example("体温", "38.2℃", 0, earlier_negative=True)
    assert [s.text for s in earlier_steps(negative)] == [
        "体",
        "体温",
        "体温38",
        "体温38.",
        "体温38.2",
    ]


def test_it_meets_recall_and_precision_on_the_held_out_split():
    metrics = starter_model().metrics
    print(
        f"held out: precision {metrics['precision']:.3f}, recall {metrics['recall']:.3f} "
        f"at threshold {metrics['threshold']:.3f} over {metrics['heldout_examples']} fragments; "
        f"{metrics['pauses_per_100_tokens']:.1f} pauses per 100 tokens"
    )
    assert metrics["recall"] >= 0.8 and metrics["precision"] >= 0.7
    assert metrics["heldout_examples"] + metrics["train_examples"] == len(load_starter_set())
    for group in (*DOMAINS, "en", "zh"):
        assert metrics["groups"][group]["recall"] >= 0.6, group
    assert 0 < metrics["pauses_per_100_tokens"] < 15


def test_it_learns_signals_from_a_domains_history():
    """History examples carry the step's signals: here reviewers stepped in after the same
    words when the model was unsure of them, and let it write on when it was sure."""
    texts = [
        ("The inhaler technique was", " reviewed"),
        ("Follow up with the", " respiratory nurse"),
        ("The family asked about", " visiting hours"),
        ("Her daughter will", " collect the prescription"),
        ("The ward round", " is at nine"),
        ("He prefers to be called", " Tom"),
    ]
    unsure, sure = {"top1_prob": 0.1, "entropy": 4.0}, {"top1_prob": 0.95, "entropy": 0.2}
    history = [
        Example(before, after, label, signals, "clinical-note", f"history-{i}-{label}-{copy}")
        for i, (before, after) in enumerate(texts)
        for label, signals in ((1, unsure), (0, sure))
        for copy in range(4)
    ]
    model = train([*load_starter_set(), *history])
    after_unsure = Example("She asked to be called", " Jo", 0, unsure).step
    after_sure = Example("She asked to be called", " Jo", 0, sure).step
    assert model.score(after_unsure) > model.threshold > model.score(after_sure)
    assert model.info["domains"] == sorted(DOMAINS)


def test_it_replays_sessions_for_the_pauses_it_would_cause():
    model = starter_model()
    quiet = text_session("The plan was discussed with the patient and family. " * 5)
    dosing = text_session("Start apixaban 5 mg twice daily. ")
    rate, pauses, tokens = pause_rate(model, [quiet], model.threshold)
    assert pauses == 0 and tokens == len(quiet) and rate == 0.0
    rate, pauses, tokens = pause_rate(model, [dosing], model.threshold)
    assert pauses == 1 and rate == pytest.approx(100 / tokens)
    metrics = train(load_starter_set(), sessions=[quiet, dosing]).metrics
    assert metrics["replayed_on"] == "sessions" and metrics["replay_pauses"] == 1


def test_it_refuses_examples_of_one_class():
    with pytest.raises(ValueError, match="both positive and negative"):
        train([Example("a", " b", 1, key=str(i)) for i in range(20)])


def test_a_trained_model_records_where_it_came_from():
    model = starter_model()
    assert model.info["positives"] > 200 and 0.05 <= model.threshold <= 0.95
    assert isinstance(PauseModel.from_bytes(model.to_bytes()).metrics["groups"], dict)
