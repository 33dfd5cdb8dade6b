"""How the vLLM engine is built: a small validated dataclass, read from the environment.

The engine must run in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``): the logits
processor that decides pauses calls each session's sink and control handle directly.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from inference import compile_cache

# Set before vllm is imported; an operator's own values win except multiprocessing.
ENVIRONMENT_DEFAULTS = {
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache on the CPU build
    "HF_HUB_OFFLINE": "1",  # models are local directories; no hub at run time
    "VLLM_LOGGING_LEVEL": "WARNING",
    "VLLM_LOGGING_STREAM": "ext://sys.stderr",  # stdout may carry a program's output
    # vLLM 0.32's AOT artifact does not load back on torch 2.13 ("'function' object has no
    # attribute 'finalize_loading'"), so every start compiled anew (80 s on 2 cores);
    # inductor's own cache loads the graph (a start in about 30 s).
    "VLLM_USE_AOT_COMPILE": "0",
}


def prepare_environment() -> None:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the processor needs our objects
    for name, value in ENVIRONMENT_DEFAULTS.items():
        os.environ.setdefault(name, value)
    # vLLM's graph is kept by inductor's caches, with the transformers step's.
    compile_cache.use_cache_dir()
    os.environ.setdefault("VLLM_CACHE_ROOT", str(compile_cache.cache_dir() / "vllm"))


def switch(raw: str) -> bool:
    """On or off, as webapp/env.py reads a switch; anything else is refused, not taken as off."""
    word = raw.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    raise ValueError(raw)


@dataclass(frozen=True)
class VllmSettings:
    """Engine arguments that matter to Caesura. CPU defaults measured on a 2-core machine;
    on a GPU raise ``gpu_memory_utilization`` and ``tensor_parallel_size`` as needed."""

    max_model_len: int = 4096  # prompt + generated tokens of one session
    max_num_seqs: int = 64  # sessions decoded in one batch at most
    block_size: int | None = 32  # prefix-cache granularity; None: the platform's default
    gpu_memory_utilization: float = 0.9  # GPU only: share of the card vLLM may take
    tensor_parallel_size: int = 1  # GPU only: cards one model is split across
    # Graph mode (torch.compile; CUDA graphs on a GPU). On a 2-core CPU it doubles the batch:
    # 8 sessions at 104 against 52 tokens/s eager (docs/benchmarks.md). A first start
    # compiles (about 80 s), later ones load the graph from the cache; eager starts in 13 s.
    enforce_eager: bool = False

    def __post_init__(self) -> None:
        if self.max_model_len < 16:
            raise ValueError("max_model_len must be >= 16")
        if self.max_num_seqs < 1:
            raise ValueError("max_num_seqs must be >= 1")
        if self.block_size is not None and (self.block_size < 16 or self.block_size % 16):
            raise ValueError("block_size must be a multiple of 16")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError("gpu_memory_utilization must be in (0, 1]")
        if self.tensor_parallel_size < 1:
            raise ValueError("tensor_parallel_size must be >= 1")

    @classmethod
    def from_env(cls, **overrides: Any) -> VllmSettings:
        """CAESURA_VLLM_MAX_MODEL_LEN, _MAX_NUM_SEQS, _BLOCK_SIZE, _GPU_MEMORY_UTILIZATION,
        _TENSOR_PARALLEL_SIZE, _ENFORCE_EAGER; arguments override them."""
        read: dict[str, Callable[[str], Any]] = {
            "max_model_len": int,
            "max_num_seqs": int,
            "block_size": int,
            "gpu_memory_utilization": float,
            "tensor_parallel_size": int,
            "enforce_eager": switch,
        }
        values: dict[str, Any] = {}
        for name, convert in read.items():
            raw = os.environ.get(f"CAESURA_VLLM_{name.upper()}")
            if raw:
                try:
                    values[name] = convert(raw)
                except ValueError:
                    raise ValueError(f"CAESURA_VLLM_{name.upper()}={raw!r} is not valid") from None
        return cls(**{**values, **overrides})

    def engine_args(self, model_dir: str, dtype: torch.dtype) -> dict[str, Any]:
        """Keyword arguments for ``vllm.EngineArgs``."""
        from inference.vllm_backend.processor import CaesuraLogitsProcessor

        args: dict[str, Any] = dict(
            model=model_dir,
            dtype=str(dtype).removeprefix("torch."),
            enforce_eager=self.enforce_eager,
            logits_processors=[CaesuraLogitsProcessor],
            enable_prefix_caching=True,  # a resume resubmits prompt + generated ids
            # A partial prefill is sampled and its token thrown away: the processor would
            # decide a pause on logits that mean nothing. Whole prefills only.
            enable_chunked_prefill=False,
            max_model_len=self.max_model_len,
            max_num_batched_tokens=max(self.max_model_len, 2048),
            max_num_seqs=self.max_num_seqs,
            tensor_parallel_size=self.tensor_parallel_size,
            gpu_memory_utilization=self.gpu_memory_utilization,
            seed=0,
        )
        if self.block_size is not None:
            args["block_size"] = self.block_size
        return args
