"""Admin regexes: refused when they nest quantifiers, and never searched for long."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from inference.safe_regex import (
    UnsafePatternError,
    compile_safe,
    find_nested_quantifier,
    search_recent,
)


@pytest.mark.parametrize(
    "pattern",
    ["(a+)+$", "(a*)*", "(.*a){20}", "((a+)b)+", r"(\w+\s?)*$", "(?:x+y?)+", "(a{2,})+"],
)
def test_it_finds_nested_quantifiers(pattern):
    assert find_nested_quantifier(pattern) is not None


@pytest.mark.parametrize(
    "pattern",
    [
        r"\d+(?:\.\d+)?",
        "(?:ab)+",
        "(a+)?",
        "(a+){1}",
        r"[(+)]+",
        r"\(a+\)+",
        r"\p{L}+",
        "(?P<dose>\\d+) ?mg",
        "a{2,3}(bc){2}",
        "(a+)++",
    ],
)
def test_it_accepts_patterns_without_nested_repeats(pattern):
    assert find_nested_quantifier(pattern) is None


def test_it_reports_invalid_patterns_and_flags():
    with pytest.raises(UnsafePatternError, match="invalid regular expression"):
        compile_safe("[unclosed")
    with pytest.raises(UnsafePatternError, match='unknown flag "z"'):
        compile_safe("a", "z")
    assert compile_safe("A", "i").search("a")


def test_it_reports_offsets_into_the_whole_text():
    text = "x" * 5000 + "dose 5 mg"
    (match,) = search_recent(compile_safe(r"\d mg"), text)
    assert (match.start(), match.end()) == (5005, 5009)


def test_it_only_searches_recent_text():
    text = "5 mg" + "x" * 5000
    assert list(search_recent(compile_safe(r"\d mg"), text)) == []


def test_it_gives_up_on_a_runaway_search_quickly():
    compiled = compile_safe("(a|aa)+$")  # slips past the nested-quantifier check
    started = time.monotonic()
    assert list(search_recent(compiled, "a" * 60 + "!")) == []
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize(
    "pattern", ["a{1000000000}", "x{5,1000000000}", "(?:ab){2001,}", "b{,99999}"]
)
def test_it_refuses_a_repeat_count_past_the_window_before_compiling_it(pattern):
    """Compiling a{1000000000} alone took a server process to 23 GB: refused before. Run in a
    process of its own with its memory capped, so that a regression fails here, not the host."""
    probe = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, resource.RLIM_INFINITY))\n"
        "from inference.safe_regex import UnsafePatternError, compile_safe\n"
        "try:\n"
        "    compile_safe(sys.argv[1])\n"
        "except UnsafePatternError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, pattern], capture_output=True, text=True, timeout=60
    )
    assert "repeat count near" in done.stdout, done.stderr[-500:]


@pytest.mark.parametrize("pattern", ["a{2000}", r"\{1000000000}", "[{1000000000}]", r"\d{1,3}"])
def test_it_takes_counts_within_the_window_and_braces_that_are_not_counts(pattern):
    assert compile_safe(pattern).pattern == pattern


@pytest.mark.parametrize(
    ("pattern", "flags"),
    [("(a+) +$", "x"), ("(?x)(a+) +$", ""), ("(?x: (a+) # many a\n +)$", ""), ("(a #x\n+)+", "x")],
)
def test_it_reads_a_verbose_pattern_without_its_spaces_and_comments(pattern, flags):
    with pytest.raises(UnsafePatternError, match="repeated group contains another repeat"):
        compile_safe(pattern, flags)


def test_it_keeps_what_verbose_mode_keeps():
    compile_safe(r"(a+) +$")  # not verbose: the space is the repeated atom
    compile_safe(r"(?x) (a+) [ ]+ \ + $")  # a space in a class or escaped is an atom
    assert compile_safe("(?x) 5 \\ mg  # a dose").search("take 5 mg") is not None
