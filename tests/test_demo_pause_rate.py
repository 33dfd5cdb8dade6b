"""The demo's pause policies are ones a reviewer would keep: on the demo cases (the real
model, fixed seeds) each domain pauses at most 3 times per 200 generated tokens in median,
and the overconfidence rule still fires on a case written to trigger it.

The engine runs in-process (no worker): each case is started as a session would be and
resumed at every pause, and pauses never change the tokens."""

from __future__ import annotations

import pytest

from reviewer.demo.demo_data import CASES, OVERCONFIDENT_CASE, POLICIES
from reviewer.demo.demo_pauses import CaseRun, median_per_200, run_case

# The task type comes from the enabled classifier version, which lives in the database.
pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.django_db]

MAX_MEDIAN_PER_200 = 3


def specs(slug: str) -> list[dict]:
    """The demo policies as the engine takes them (without their display names)."""
    return [{k: v for k, v in spec.items() if k != "name_zh"} for spec in POLICIES[slug]]


@pytest.mark.parametrize("slug", sorted(CASES))
def test_each_demo_domain_pauses_at_most_3_times_per_200_tokens_in_median(real_engine, slug):
    runs: list[CaseRun] = [run_case(real_engine, slug, case, specs(slug)) for case in CASES[slug]]
    rates = [f"{run.per_200:.1f} ({len(run.pauses)} in {run.tokens})" for run in runs]
    assert all(run.tokens > 0 for run in runs)
    assert median_per_200(runs) <= MAX_MEDIAN_PER_200, f"{slug}: pauses per 200 tokens {rates}"


def test_the_overconfidence_rule_still_fires_on_absolute_wording(real_engine):
    slug = OVERCONFIDENT_CASE["domain"]
    run = run_case(real_engine, slug, OVERCONFIDENT_CASE, specs(slug))
    assert "Overconfidence" in run.pauses, (run.pauses, run.text)
