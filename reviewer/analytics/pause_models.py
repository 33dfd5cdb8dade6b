"""The learned pause policy on the web side: training examples from a domain's history,
trained models kept as versions (bytes in Postgres, a file under PAUSE_MODEL_DIR), the
domain's `learned` policy pointed at one, and enabling it audited.

History labels (the issue's rule): a reviewer's own pause, and a policy pause followed by
an edit or a rollback, are moments a reviewer intervened (1); a policy pause resumed
without a change is one where they did not (0). A pause never resumed teaches nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from inference.learned.pause_model import PauseModel, store_model_bytes
from inference.learned.pause_training import Example, Session, load_starter_set, train
from reviewer.analytics.calibration import RECENT_SESSIONS, history_of, recent_sessions, recorded
from reviewer.lifecycle import audit, record
from reviewer.models import Domain, Edit, PauseEvent, PauseModelVersion, PausePolicy, ReviewSession

POLICY_NAME = "Learned pauses"
LEARNED = "learned"
HISTORY_SESSIONS = 500  # the most recent sessions a training run reads


def history_examples(domain: Domain, limit: int = HISTORY_SESSIONS) -> list[Example]:
    """Labelled moments from the domain's sessions: one per pause a reviewer answered, cut
    from the tokens as they were at the pause (the final ones hold the reviewer's edits)."""
    examples = []
    for session in recent_sessions(domain, limit):
        labels = pause_labels(session)
        for pause_id, tokens in history_of(session).pauses:
            if pause_id not in labels or not tokens:
                continue
            examples.append(
                Example(
                    text_before=record.text_of(tokens[:-1]),
                    next_text=tokens[-1].text,
                    label=labels[pause_id],
                    signals=signals_of(tokens[-1]),
                    domain=domain.slug,
                    # the split hashes the key: a session's pauses are held out together, so
                    # no held-out moment shares its text with one the model was fitted on
                    key=f"session-{session.pk}",
                )
            )
    return examples


def signals_of(token: record.Token) -> dict[str, float] | None:
    """The step's signals as stored with its token; None where none were (as for
    hand-labelled text)."""
    stored = recorded(token)
    return None if stored is None else {"top1_prob": stored.top1_prob, "entropy": stored.entropy}


def pause_labels(session: ReviewSession) -> dict[int, int]:
    """pause id -> 1 (a reviewer intervened there) or 0 (resumed unchanged)."""
    edited = set(
        Edit.objects.filter(session=session, applied=True, pause__isnull=False).values_list(
            "pause_id", flat=True
        )
    )
    labels = {}
    pauses = PauseEvent.objects.filter(session=session).exclude(kind=PauseEvent.REOPENED)
    for pause in pauses.only("id", "kind", "resumed_at"):
        if pause.kind == "manual" or pause.pk in edited:
            labels[pause.pk] = 1
        elif pause.resumed_at is not None:
            labels[pause.pk] = 0
    return labels


def replay_sessions(domain: Domain, limit: int = RECENT_SESSIONS) -> list[Session]:
    """The domain's recent generations, token by token with their signals, for the pause
    rate a model would cause."""
    histories = [history_of(s) for s in recent_sessions(domain, limit)]
    return [
        [(t.text, {"top1_prob": t.top1_prob, "entropy": t.entropy}) for t in h.tokens]
        for h in histories
        if h.tokens
    ]


def train_for(domain: Domain, threshold: float | None = None) -> tuple[PauseModel, int]:
    """A model trained on the starter set and the domain's history; (model, history count).
    Measured on the domain's recent sessions when it has any."""
    own = history_examples(domain)
    sessions = replay_sessions(domain) or None
    info = {"domain": domain.slug, "history_examples": len(own)}
    model = train([*load_starter_set(), *own], sessions=sessions, threshold=threshold, info=info)
    return model, len(own)


def model_dir() -> Path:
    return Path(settings.PAUSE_MODEL_DIR)


@transaction.atomic
def store_version(domain: Domain, model: PauseModel, who: str) -> PauseModelVersion:
    data = model.to_bytes()
    latest = domain.pause_models.aggregate(v=Max("version"))["v"] or 0
    version = PauseModelVersion.objects.create(
        domain=domain,
        version=latest + 1,
        checksum=model.checksum,
        data=data,
        metrics=model.metrics,
        created_by=who,
    )
    store_model_bytes(data, model_dir())
    return version


def point_policy(
    version: PauseModelVersion, threshold: float | None, enable: bool, who: str
) -> PausePolicy:
    """Create or update the domain's learned policy to use `version`; disabled unless
    `enable` (and then audited)."""
    policy = PausePolicy.objects.filter(domain=version.domain, kind=LEARNED).first()
    if policy is None:
        policy = PausePolicy(domain=version.domain, name=POLICY_NAME, kind=LEARNED, enabled=False)
    policy.params = {
        "model": str(model_path(version)),
        "checksum": version.checksum,
        "threshold": threshold,
    }
    was_enabled = policy.pk is not None and policy.enabled
    policy.enabled = policy.enabled or enable
    policy.full_clean(exclude=["order"])
    policy.save()
    if policy.enabled and (enable or was_enabled):
        record_enabled(policy, who)
    return policy


def model_path(version: PauseModelVersion) -> Path:
    """Where store_model_bytes puts this version's file (named by its checksum)."""
    return store_model_bytes(bytes(version.data), model_dir())


def record_enabled(policy: PausePolicy, who: str) -> None:
    """The audit record of a learned policy going live, naming its model and metrics."""
    version = version_of(policy)
    payload: dict[str, Any] = {
        "policy": policy.name,
        "domain": policy.domain.slug,
        "checksum": policy.params.get("checksum"),
        "threshold": policy.params.get("threshold"),
    }
    if version is not None:
        metrics = version.metrics
        payload |= {"version": version.version, "metrics": headline(metrics)}
    audit.append("pause_model_enabled", who, None, payload)


def goes_live(before: PausePolicy | None, after: PausePolicy) -> bool:
    """Whether saving `after` over `before` enables a learned model: the policy turned on,
    or pointed at another model while on."""
    if after.kind != LEARNED or not after.enabled:
        return False
    return before is None or not before.enabled or before.params != after.params


def version_of(policy: PausePolicy) -> PauseModelVersion | None:
    checksum = policy.params.get("checksum")
    return PauseModelVersion.objects.filter(domain=policy.domain, checksum=checksum).first()


def headline(metrics: dict[str, Any]) -> dict[str, Any]:
    keys = ("precision", "recall", "f1", "threshold", "pauses_per_100_tokens")
    return {key: metrics.get(key) for key in keys}


def ensure_files(specs: list[dict[str, Any]]) -> None:
    """Write back the model file of every learned spec whose file is missing (a new worker
    host, a wiped data dir) from the version stored in Postgres, before the engine builds
    the policy. A spec without a stored version is left to fail with the engine's message."""
    for spec in specs:
        params = spec.get("params") or {}
        path = params.get("model")
        if spec.get("kind") != LEARNED or not isinstance(path, str) or Path(path).is_file():
            continue
        version = PauseModelVersion.objects.filter(checksum=params.get("checksum")).first()
        if version is not None:
            written = store_model_bytes(bytes(version.data), Path(path).parent)
            if written != Path(path):
                written.replace(path)
