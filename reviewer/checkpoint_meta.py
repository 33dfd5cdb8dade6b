"""Which fields of a paused state's record a session stores as its checkpoint meta.

A session keeps part of its record in columns of its own (the ids, the decoding, the
policies, the budget, the muted names); the rest is the JSON ``engine_meta``. The engine
knows nothing of those columns: this module decides, and ``reviewer.worker`` rebuilds the
record from the columns and the meta (``Checkpoint.from_dict(meta, **columns)``).
"""

from __future__ import annotations

from typing import Any

from inference.state import Checkpoint

# Kept in the session's own columns, and skip_before_at (a state rebuilt for a session
# decides its first boundary afresh; the policies' firing memory keeps them from firing twice).
NOT_IN_META = (
    "prompt_ids",
    "generated_ids",
    "params",
    "policy_specs",
    "skip_before_at",
    "budget",
    "muted",
)


def session_meta(record: Checkpoint) -> dict[str, Any]:
    """The JSON a session stores next to its own columns."""
    out = record.to_dict()
    for name in NOT_IN_META:
        del out[name]
    if not out["notes"]:  # most sessions have none; their meta stays as it was
        del out["notes"]
    return out
