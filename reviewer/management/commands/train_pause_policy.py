"""Train the learned pause policy of a domain; print how it would do before anyone uses it."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewer.analytics import pause_models
from reviewer.lifecycle.inputs import domain_named
from reviewer.models import PauseModelVersion
from reviewer.web.arguments import InvalidInput


class Command(BaseCommand):
    help = (
        "Train a pause model on the starter set and the domain's history (reviewers' own "
        "pauses and policy pauses they acted on), store it as a new version and point the "
        "domain's learned policy at it (disabled unless --enable)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--domain", required=True, help="the domain's name or slug")
        parser.add_argument(
            "--threshold", type=float, help="pause at this score (default: chosen in training)"
        )
        parser.add_argument("--enable", action="store_true", help="enable the policy (audited)")

    def handle(self, *args: Any, **options: Any) -> None:
        threshold = options["threshold"]
        if threshold is not None and not 0.0 <= threshold <= 1.0:
            raise CommandError("--threshold must be between 0 and 1")
        try:
            domain = domain_named(options["domain"])
        except InvalidInput as exc:
            raise CommandError(str(exc)) from None
        model, own = pause_models.train_for(domain, threshold)
        version = pause_models.store_version(domain, model, "manage.py train_pause_policy")
        policy = pause_models.point_policy(
            version, threshold, options["enable"], "manage.py train_pause_policy"
        )
        self.report(domain.name, version, own, policy.enabled)

    def report(self, domain: str, version: PauseModelVersion, own: int, enabled: bool) -> None:
        m = version.metrics
        on = "the domain's recent sessions" if m["replayed_on"] == "sessions" else "held-out texts"
        lines = [
            f"{domain}: pause model v{version.version} ({version.checksum[:12]}), trained on "
            f"{m['train_examples']} examples ({own} from this domain's history)",
            f"  held out ({m['heldout_examples']} examples): precision {m['precision']:.2f}, "
            f"recall {m['recall']:.2f}, F1 {m['f1']:.2f} at threshold {m['threshold']:.2f}",
            f"  pauses per 100 tokens on {on}: {m['pauses_per_100_tokens']:.2f} "
            f"({m['replay_pauses']} in {m['replay_tokens']} tokens)",
            f'  policy "{pause_models.POLICY_NAME}": {"enabled" if enabled else "disabled"}',
        ]
        self.stdout.write("\n".join(lines))
