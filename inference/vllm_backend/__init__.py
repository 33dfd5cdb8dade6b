"""The vLLM backend: the engine contract over vLLM's continuous batching and prefix cache.

    from inference.vllm_backend import load_vllm_engine
    engine = load_vllm_engine("var/models/smollm2-135m-instruct")

Install it with ``pip install --no-deps -r requirements-vllm.txt`` (see that file). Modules:
``settings`` (engine arguments), ``generation`` (one submission's per-step decisions),
``processor`` (the vLLM logits processor that asks them), ``engine`` (VllmEngine),
``loading`` (building one from a model directory).
"""

from inference.vllm_backend.loading import load_vllm_engine

__all__ = ["load_vllm_engine"]
