"""The objects a process makes while it starts (modules, settings, a loaded model) live as
long as it does. Python's full garbage collections walk every tracked object, and a worker
holds about 630,000 of them once the model is loaded: each full collection then stops every
thread of the process for about 300 ms (110 ms in the web process), which a reviewer feels as
a pause that lands late or a panel that shows late. Moving what exists at the end of the start
into the permanent generation (``gc.freeze``) leaves collections only the objects made since.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)


def freeze_startup_objects() -> int:
    """Exempt every object alive now from later collections; how many are exempt."""
    gc.collect()  # what is already garbage is not kept for the rest of the process's life
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("%d objects made at start-up are left out of garbage collections", frozen)
    return frozen
