"""How the transformers backend runs its decode step: a small validated dataclass, read from
the environment (CAESURA_COMPILE, CAESURA_WEIGHTS, CAESURA_COMPILE_MAX_CONTEXT)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from inference.env import data_dir, env_bool, env_choice, env_int

WEIGHTS = ("float", "int8")
MIN_CONTEXT = 256


@dataclass(frozen=True)
class StepSettings:
    compile: bool = True  # the decode step as one compiled graph; False: eager PyTorch
    weights: str = "float"  # "int8": linear weights quantized per output channel
    max_context: int = 2048  # positions the compiled step covers; longer contexts run eagerly

    def __post_init__(self) -> None:
        if self.weights not in WEIGHTS:
            raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}, not {self.weights!r}")
        if self.max_context < MIN_CONTEXT:
            raise ValueError(f"max_context must be at least {MIN_CONTEXT}")

    @classmethod
    def from_env(cls) -> StepSettings:
        return cls(
            compile=env_bool("CAESURA_COMPILE", cls.compile),
            weights=env_choice("CAESURA_WEIGHTS", cls.weights, WEIGHTS),
            max_context=env_int("CAESURA_COMPILE_MAX_CONTEXT", cls.max_context, MIN_CONTEXT),
        )

    @staticmethod
    def cache_dir() -> Path:
        """Where compiled code is kept between starts, so that only the first one pays."""
        return data_dir() / "compiled"
