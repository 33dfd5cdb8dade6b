"""Train the task-type classifier on the fixed training split and report on the held-out one."""

from __future__ import annotations

import csv
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewer.lifecycle import task_types
from reviewer.management import input_files


class Command(BaseCommand):
    help = "Print the task classifier's held-out accuracy, confusion matrix and speed."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--data",
            type=Path,
            default=task_types.DATA_FILE,
            help="a UTF-8 CSV file with a header row: text,label[,domain,lang]",
        )
        parser.add_argument(
            "--min-accuracy", type=float, default=0.0, help="Exit with an error below this"
        )
        parser.add_argument("--show-mistakes", action="store_true")

    def handle(
        self, *args: Any, data: Path, min_accuracy: float, show_mistakes: bool, **options: Any
    ) -> None:
        examples = read_examples(data)
        train, held_out = task_types.split(examples)
        if not train or not held_out:
            raise CommandError(
                f"{data} holds {len(examples)} example(s): too few to train on and hold out"
                f" (every {task_types.HELD_OUT_EVERY}th of each label, domain and language is"
                " held out)"
            )
        classifier = task_types.TaskClassifier().fit(train)
        started = time.perf_counter()
        result = task_types.evaluate(classifier, held_out)
        per_prompt_ms = (time.perf_counter() - started) * 1000 / max(result.total, 1)
        self.stdout.write(f"examples: {len(train)} training, {len(held_out)} held out ({data})")
        self.stdout.write(f"accuracy: {result.accuracy:.1%} on the held-out split")
        self.stdout.write(f"speed: {per_prompt_ms:.3f} ms per prompt")
        self.stdout.write(confusion_table(result.confusion))
        if show_mistakes:
            for example, predicted in result.mistakes:
                self.stdout.write(f"  {example.label} -> {predicted}: {example.text}")
        if result.accuracy < min_accuracy:
            raise CommandError(f"accuracy {result.accuracy:.1%} is below {min_accuracy:.1%}")


REQUIRED = ("text", "label")


def read_examples(path: Path) -> list[task_types.Example]:
    """The labelled examples of ``path``; CommandError saying what is wrong with the file."""
    input_files.require_file("--data", path, "a CSV file")
    with input_files.reading("--data", path):
        check_rows(path)
        try:
            return task_types.load_examples(path)
        except UnicodeDecodeError:
            raise  # said by reading()
        except ValueError as exc:  # an unknown label: the message names them
            raise CommandError(str(exc)) from None


def check_rows(path: Path) -> None:
    """The columns the examples need, in the first row, and in every row after it."""
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        columns = reader.fieldnames or []
        missing = [name for name in REQUIRED if name not in columns]
        if missing:
            raise CommandError(
                f"--data {path}: no {' or '.join(repr(m) for m in missing)} column; the"
                " first row must name the columns: text,label[,domain,lang]"
                f" (it has {', '.join(repr(c) for c in columns) or 'none'})"
            )
        for row in reader:
            if any(row.get(name) is None for name in REQUIRED):
                raise CommandError(
                    f"--data {path}, line {reader.line_num}: the row has no"
                    f" {' or '.join(n for n in REQUIRED if row.get(n) is None)}"
                )


def confusion_table(confusion: dict[str, dict[str, int]]) -> str:
    labels = task_types.LABELS
    width = max(len(label) for label in labels) + 2
    lines = ["confusion matrix (rows: true label, columns: predicted)"]
    lines.append(" " * width + "".join(label.rjust(width) for label in labels))
    for true in labels:
        cells = "".join(str(confusion[true][p]).rjust(width) for p in labels)
        lines.append(true.ljust(width) + cells)
    return "\n".join(lines)
