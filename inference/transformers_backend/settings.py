"""How the transformers backend runs its decode step: a small validated dataclass, read from
the environment (CAESURA_COMPILE, CAESURA_WEIGHTS)."""

from __future__ import annotations

from dataclasses import dataclass

from inference.env import env_bool, env_choice

WEIGHTS = ("float", "int8")


@dataclass(frozen=True)
class StepSettings:
    compile: bool = True  # the decode step as one compiled graph; False: eager PyTorch
    weights: str = "float"  # "int8": linear weights quantized per output channel

    def __post_init__(self) -> None:
        if self.weights not in WEIGHTS:
            raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}, not {self.weights!r}")

    @classmethod
    def from_env(cls) -> StepSettings:
        return cls(
            compile=env_bool("CAESURA_COMPILE", cls.compile),
            weights=env_choice("CAESURA_WEIGHTS", cls.weights, WEIGHTS),
        )
