"""Train the task-type classifier on the fixed training split and report on the held-out one."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewer.lifecycle import task_types


class Command(BaseCommand):
    help = "Print the task classifier's held-out accuracy, confusion matrix and speed."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--data", type=Path, default=task_types.DATA_FILE)
        parser.add_argument(
            "--min-accuracy", type=float, default=0.0, help="Exit with an error below this"
        )
        parser.add_argument("--show-mistakes", action="store_true")

    def handle(
        self, *args: Any, data: Path, min_accuracy: float, show_mistakes: bool, **options: Any
    ) -> None:
        train, held_out = task_types.split(task_types.load_examples(data))
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


def confusion_table(confusion: dict[str, dict[str, int]]) -> str:
    labels = task_types.LABELS
    width = max(len(label) for label in labels) + 2
    lines = ["confusion matrix (rows: true label, columns: predicted)"]
    lines.append(" " * width + "".join(label.rjust(width) for label in labels))
    for true in labels:
        cells = "".join(str(confusion[true][p]).rjust(width) for p in labels)
        lines.append(true.ljust(width) + cells)
    return "\n".join(lines)
