"""What the configured backend offers beyond the shared contract, as the backend declares it
(``inference.backend.DECLARED_FEATURES``, which each engine class takes as its ``features``),
for the pages that show or hide what depends on it. No engine is imported for it."""

from __future__ import annotations

from django.conf import settings

from inference.backend import DECLARED_FEATURES


def backend_features() -> frozenset[str]:
    """The features of the backend CAESURA_BACKEND names."""
    return DECLARED_FEATURES[settings.CAESURA_BACKEND]
