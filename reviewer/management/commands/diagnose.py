"""Run the engine over a prompt file: latency percentiles, step traces, an A/B comparison."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from inference.config import SamplingConfigError, SamplingParams
from inference.loader import ModelNotFoundError, load_engine
from reviewer.analytics import diagnostics as diag
from reviewer.management import input_files

if TYPE_CHECKING:
    from inference.transformers_backend.engine import Engine


class Command(BaseCommand):
    help = (
        "Run the engine (no worker) over a prompt file and print first-token and total "
        "latency p50/p90/p95, per-step entropy and prompt-similarity traces, and an A/B "
        "comparison of two decoding configurations."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--prompts",
            type=Path,
            required=True,
            help="text (one per line) or CSV with a text column",
        )
        parser.add_argument("--a", default="deterministic", help="task type or JSON parameters")
        parser.add_argument("--b", default="open", help="task type or JSON parameters")
        parser.add_argument(
            "--max-new-tokens",
            type=int,
            default=32,
            help="tokens to generate per prompt (1 or more)",
        )
        parser.add_argument(
            "--limit", type=int, default=0, help="use only the first N prompts (0: all of them)"
        )
        parser.add_argument(
            "--trace", type=int, nargs="*", default=[1], help="1-based prompt numbers to trace"
        )
        parser.add_argument(
            "--domain", help="slug of a domain whose system prompt and policies to use"
        )
        parser.add_argument("--model", type=Path, default=None, help="model directory")

    def handle(self, *args: Any, **opts: Any) -> None:
        # Every argument is checked before the model loads (which takes a while).
        limit = opts["max_new_tokens"]
        if limit < 1:
            raise CommandError(f"--max-new-tokens {limit}: generate at least 1 token")
        if opts["limit"] < 0:
            raise CommandError(
                f"--limit {opts['limit']}: give how many prompts to use (0, the default: all)"
            )
        prompts = self.prompts(opts["prompts"], opts["limit"])
        for number in opts["trace"]:
            if not 1 <= number <= len(prompts):
                raise CommandError(
                    f"--trace {number}: give a prompt number from 1 to {len(prompts)}"
                )
        configs = {name: self.config(opts[name.lower()]) for name in ("A", "B")}
        system, policies = self.domain(opts["domain"])
        engine = self.engine(opts["model"])
        results: dict[str, list[diag.RunResult]] = {}
        for name, params in configs.items():
            results[name] = [
                diag.run_prompt(engine, p, params, policies, system, limit) for p in prompts
            ]
            self.print_latency(name, params, results[name])
        self.print_comparison(results["A"], results["B"])
        for number in opts["trace"]:
            for name in configs:
                self.print_trace(name, number, results[name][number - 1])

    def prompts(self, path: Path, limit: int) -> list[str]:
        input_files.require_file("--prompts", path, "a prompt file")
        with input_files.reading("--prompts", path):
            prompts = diag.read_prompts(path)
        prompts = prompts[:limit] if limit else prompts
        if not prompts:
            raise CommandError(f"{path} holds no prompts")
        return prompts

    def engine(self, model: Path | None) -> Engine:
        if model is not None and not model.is_dir():
            there = "not a directory" if model.exists() else "no such directory"
            raise CommandError(f"--model {model}: {there}; give a model directory")
        try:
            return load_engine(model or settings.MODEL_DIR)
        except ModelNotFoundError as exc:
            raise CommandError(str(exc)) from None

    def config(self, raw: str) -> SamplingParams:
        try:
            return diag.parse_config(raw)
        except (ValueError, SamplingConfigError, TypeError) as exc:
            raise CommandError(f"Bad decoding configuration {raw!r}: {exc}") from None

    def domain(self, slug: str | None) -> tuple[str | None, list[dict[str, Any]]]:
        if not slug:
            return None, []
        from reviewer.models import Domain

        domain = Domain.objects.filter(slug=slug).first()
        if domain is None:
            raise CommandError(f"Unknown domain {slug!r}")
        return domain.system_prompt, [p.to_spec() for p in domain.policies.filter(enabled=True)]

    def print_latency(
        self, name: str, params: SamplingParams, results: list[diag.RunResult]
    ) -> None:
        self.stdout.write(f"\nConfiguration {name}: {params.to_dict()}")
        self.stdout.write(f"  {'latency (s)':<14}{'p50':>9}{'p90':>9}{'p95':>9}")
        for row, values in diag.latency_table(results).items():
            cells = "".join(_cell(values[q]) for q in ("p50", "p90", "p95"))
            self.stdout.write(f"  {row:<14}{cells}")

    def print_comparison(self, a: list[diag.RunResult], b: list[diag.RunResult]) -> None:
        self.stdout.write("\nA/B comparison")
        self.stdout.write(f"  {'':<22}{'A':>10}{'B':>10}")
        for label, va, vb in diag.comparison(a, b):
            self.stdout.write(f"  {label:<22}{_cell(va, 10)}{_cell(vb, 10)}")

    def print_trace(self, name: str, number: int, result: diag.RunResult) -> None:
        self.stdout.write(f"\nTrace, prompt {number}, configuration {name}: {result.prompt[:60]!r}")
        self.stdout.write(
            f"  {'pos':>4}  {'token':<16}{'top1 p':>8}{'entropy':>9}{'similarity':>12}"
        )
        for step in result.steps:
            similarity = "-" if step.similarity is None else f"{step.similarity:.3f}"
            self.stdout.write(
                f"  {step.position:>4}  {step.text[:16]!r:<16}{step.probability:>8.3f}"
                f"{step.entropy:>9.3f}{similarity:>12}"
            )


def _cell(value: float | None, width: int = 9) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.3f}"
