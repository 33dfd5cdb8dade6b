"""What the configured backend offers beyond the shared contract, as the backend declares it
(the ``features`` attribute of its engine class), for the pages that show or hide what
depends on it."""

from __future__ import annotations

import functools

from django.conf import settings


@functools.cache
def backend_features() -> frozenset[str]:
    """The features of the backend CAESURA_BACKEND names. Its class is imported on the first
    call, not when the web process starts (the session page already loads the model's
    tokenizer, and with it transformers)."""
    if settings.CAESURA_BACKEND == "vllm":
        from inference.vllm_backend.engine import VllmEngine

        return VllmEngine.features
    from inference.transformers_backend.engine import Engine

    return Engine.features
