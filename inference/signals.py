"""What the model's next-token distribution says about one decode step."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Alternative:
    """One candidate next token from the top-k of the distribution."""

    token_id: int
    text: str
    prob: float

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Signals:
    """Summary of one next-token distribution, taken at temperature 1."""

    top1_prob: float  # probability of the most likely next token
    entropy: float  # nats, of the raw (temperature 1) distribution
    margin: float  # top1_prob - top2_prob
    alternatives: tuple[Alternative, ...]  # top-k, best first
    chosen_prob: float | None = None  # probability of the chosen token (None before sampling)

    def to_dict(self) -> dict:
        return {
            "top1_prob": self.top1_prob,
            "entropy": self.entropy,
            "margin": self.margin,
            "alternatives": [a.to_dict() for a in self.alternatives],
            "chosen_prob": self.chosen_prob,
        }
