"""The diagnose command: the real model over two prompts, two decodings side by side."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from reviewer.analytics import diagnostics

TOKENS = 6


def test_it_reads_plain_and_csv_prompt_files(tmp_path):
    plain = tmp_path / "prompts.txt"
    plain.write_text("# comment\nFirst prompt.\n\n第二个提示。\n", encoding="utf-8")
    assert diagnostics.read_prompts(plain) == ["First prompt.", "第二个提示。"]
    table = tmp_path / "prompts.csv"
    table.write_text('text,label\n"One, with a comma",open\nTwo,open\n', encoding="utf-8")
    assert diagnostics.read_prompts(table) == ["One, with a comma", "Two"]


def test_it_refuses_a_bad_configuration(tmp_path):
    prompts = tmp_path / "p.txt"
    prompts.write_text("Hello.\n")
    with pytest.raises(CommandError, match="Bad decoding configuration"):
        call_command("diagnose", "--prompts", str(prompts), "--a", '{"temperature": -1}')


@pytest.mark.slow
@pytest.mark.model
def test_it_prints_latency_traces_and_an_ab_comparison(tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(
        "Write one sentence about chest pain.\n提取合同的生效日期。\n", encoding="utf-8"
    )
    out = io.StringIO()
    call_command(
        "diagnose", "--prompts", str(prompts), "--max-new-tokens", str(TOKENS),
        "--a", "deterministic", "--b", '{"temperature": 0.9, "seed": 3}', "--trace", "2",
        stdout=out,
    )  # fmt: skip
    printed = out.getvalue()
    assert printed.count("p50      p90      p95") == 2  # one latency table per configuration
    tables = printed.split("A/B comparison")[0].splitlines()
    for row in ("first token", "total"):
        assert sum(line.strip().startswith(row) for line in tables) == 2
    comparison = printed.split("A/B comparison")[1].split("Trace")[0]
    tokens = next(line for line in comparison.splitlines() if "output tokens" in line).split()
    assert float(tokens[-2]) == float(tokens[-1]) == TOKENS
    for name in ("A", "B"):
        trace = printed.split(f"Trace, prompt 2, configuration {name}")[1].split("Trace,")[0]
        steps = [line for line in trace.splitlines()[2:] if line.strip()]
        assert len(steps) == TOKENS
        similarity = [line.split()[-1] for line in steps]
        assert all(value != "-" and -1 <= float(value) <= 1 for value in similarity)
