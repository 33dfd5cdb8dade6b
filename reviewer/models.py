"""What Caesura keeps in Postgres."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import translation


def in_page_language(name: str, name_zh: str) -> str:
    """The Chinese display name on a Chinese page where an admin gave one, else the name."""
    chinese = (translation.get_language() or "").startswith("zh")
    return name_zh if chinese and name_zh else name


class Domain(models.Model):
    """A field of review (clinical notes, contracts, ...) with its prompt and decoding defaults."""

    name = models.CharField(max_length=100, unique=True)
    name_zh = models.CharField(
        "Chinese name", max_length=100, blank=True, help_text="Shown on Chinese pages"
    )
    slug = models.SlugField(max_length=100, unique=True)
    specialty = models.CharField(max_length=50, help_text="medical, legal, insurance, patent, ...")
    system_prompt = models.TextField()
    decoding = models.JSONField(default=dict, blank=True, help_text="Default sampling parameters")
    max_pauses_per_100_tokens = models.PositiveSmallIntegerField(
        "pauses per 100 tokens",
        default=3,
        validators=[MaxValueValidator(100)],
        help_text="At most this many policy pauses in any 100 generated tokens; the policies'"
        " other pauses are kept as flags. 0: no limit. Reviewers' own pauses do not count.",
    )
    min_pause_distance = models.PositiveSmallIntegerField(
        "minimum tokens between pauses",
        default=20,
        validators=[MaxValueValidator(10000)],
        help_text="A policy may pause only this many generated tokens after the last pause"
        " (a reviewer's included). 0: no minimum.",
    )
    resume_time_after_s = models.PositiveIntegerField(
        "tell the time after a pause of (seconds)",
        default=600,
        validators=[MaxValueValidator(7 * 24 * 3600)],
        help_text="Resuming after a longer pause tells the model the current time (a note in"
        " its context, not in the text). 0: never.",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def display_name(self) -> str:
        return in_page_language(self.name, self.name_zh)

    def pause_budget(self) -> dict:
        """The engine's PauseBudget as JSON: a session stores the one it started with."""
        return {
            "per_100_tokens": self.max_pauses_per_100_tokens,
            "min_distance": self.min_pause_distance,
            "hold_until_first_word": True,
        }


class Glossary(models.Model):
    domain = models.ForeignKey(Domain, on_delete=models.CASCADE, related_name="glossaries")
    name = models.CharField(max_length=100)

    class Meta:
        unique_together = [("domain", "name")]
        verbose_name_plural = "glossaries"

    def __str__(self) -> str:
        return f"{self.domain}: {self.name}"


class GlossaryTerm(models.Model):
    glossary = models.ForeignKey(Glossary, on_delete=models.CASCADE, related_name="terms")
    term = models.CharField(max_length=200)
    preferred = models.CharField(max_length=300, help_text="Preferred replacement")
    code = models.CharField(max_length=50, blank=True, help_text="ICD-10, IPC or clause code")
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["term"]
        unique_together = [("glossary", "term")]

    def __str__(self) -> str:
        return f"{self.term} → {self.preferred}"


class PausePolicy(models.Model):
    """An admin-configured reason to stop generation; parameters are validated by the engine."""

    ACTIONS = [("pause", "pause"), ("rollback", "rollback"), ("flag", "flag")]

    domain = models.ForeignKey(Domain, on_delete=models.CASCADE, related_name="policies")
    name = models.CharField(max_length=100)
    name_zh = models.CharField(
        "Chinese name", max_length=100, blank=True, help_text="Shown on Chinese pages"
    )
    kind = models.CharField(max_length=30)
    params = models.JSONField(default=dict, blank=True)
    action = models.CharField(max_length=10, choices=ACTIONS, default="pause")
    enabled = models.BooleanField(default=True)
    cooldown = models.PositiveIntegerField(default=0, help_text="Tokens before it may fire again")
    order = models.PositiveIntegerField(default=0)
    priority = models.IntegerField(
        default=0,
        validators=[MinValueValidator(-1000), MaxValueValidator(1000)],
        help_text="When several policies want to pause at the same token, the highest priority"
        " pauses and the others are kept as flags.",
    )
    may_pause_before_first_word = models.BooleanField(
        default=False,
        help_text="Allow a pause before the model has written its first word (otherwise such"
        " a pause is kept as a flag).",
    )

    class Meta:
        ordering = ["domain", "order", "id"]
        unique_together = [("domain", "name")]
        verbose_name_plural = "pause policies"

    def __str__(self) -> str:
        return f"{self.domain}: {self.name} ({self.kind})"

    @property
    def display_name(self) -> str:
        return in_page_language(self.name, self.name_zh)

    def to_spec(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "action": self.action,
            "params": self.params,
            "cooldown": self.cooldown,
            "enabled": self.enabled,
            "priority": self.priority,
            "may_pause_before_first_word": self.may_pause_before_first_word,
        }

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        from inference.policies import PolicyConfigError, build_policy

        try:
            build_policy(self.to_spec())
        except PolicyConfigError as exc:
            raise ValidationError(str(exc)) from exc


class SessionQuerySet(models.QuerySet):
    def visible_to(self, user) -> SessionQuerySet:
        return self if user.is_staff else self.filter(owner=user)

    def running(self) -> SessionQuerySet:
        return self.filter(status=ReviewSession.RUNNING)

    def paused(self) -> SessionQuerySet:
        return self.filter(status=ReviewSession.PAUSED)


class ReviewSession(models.Model):
    """One generation under review. Transitions live in reviewer.lifecycle, nowhere else."""

    DRAFT, RUNNING, PAUSED, GENERATED = "draft", "running", "paused", "generated"
    COMPLETED, REJECTED, CANCELLED, FAILED = "completed", "rejected", "cancelled", "failed"
    STATUSES = [
        (DRAFT, "draft"),
        (RUNNING, "running"),
        (PAUSED, "paused"),
        (GENERATED, "generated, awaiting decision"),
        (COMPLETED, "completed"),
        (REJECTED, "rejected"),
        (CANCELLED, "cancelled"),
        (FAILED, "failed"),
    ]
    FINAL = {COMPLETED, REJECTED, CANCELLED, FAILED}

    owner = models.ForeignKey("auth.User", on_delete=models.PROTECT, related_name="review_sessions")
    domain = models.ForeignKey(Domain, on_delete=models.PROTECT, related_name="sessions")
    input_text = models.TextField()
    model_name = models.CharField(max_length=200)
    decoding = models.JSONField(default=dict)
    policy_specs = models.JSONField(default=list)
    pause_budget = models.JSONField(
        default=dict, blank=True, help_text="The domain's pause budget when it started"
    )
    muted_policies = models.JSONField(
        default=list, blank=True, help_text="Policies its reviewer silenced for this session"
    )
    pending_note = models.TextField(
        blank=True, help_text="Context the model reads when its next segment starts (the time)"
    )
    seed = models.BigIntegerField(default=0)
    max_new_tokens = models.PositiveIntegerField(default=200)
    status = models.CharField(max_length=12, choices=STATUSES, default=DRAFT, db_index=True)
    prompt_ids = models.JSONField(default=list)
    generated_ids = models.JSONField(default=list)
    text = models.TextField(blank=True)
    engine_meta = models.JSONField(default=dict, blank=True, help_text="Attempts, policy state")
    ids_seq = models.PositiveIntegerField(
        default=0, help_text="Last event covered by generated_ids"
    )
    last_seq = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True, help_text="Worker holding the state")
    segment = models.CharField(
        max_length=32, blank=True, help_text="Token of the live segment task"
    )
    error = models.TextField(blank=True)
    decision_comment = models.TextField(blank=True)
    task_type = models.CharField(max_length=20, blank=True, help_text="Decides the decoding")
    task_source = models.CharField(
        max_length=10, blank=True, help_text="'classifier' or 'override'"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = SessionQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return f"Session {self.pk} ({self.status})"

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL


class PauseEvent(models.Model):
    session = models.ForeignKey(ReviewSession, on_delete=models.CASCADE, related_name="pauses")
    position = models.PositiveIntegerField(help_text="Generated tokens before the pause")
    trigger = models.CharField(max_length=100, help_text="'manual' or the policy's name")
    kind = models.CharField(max_length=30, blank=True, help_text="Policy kind, or 'manual'")
    reason = models.TextField()
    evidence = models.JSONField(default=dict)
    alternatives = models.JSONField(default=list)
    attention = models.JSONField(default=dict)
    requested_at = models.DateTimeField(null=True, blank=True)
    halted_at = models.DateTimeField()
    resumed_at = models.DateTimeField(null=True, blank=True)
    latency_ms = models.FloatField(null=True, blank=True, help_text="Manual pause: request to halt")
    outcome = models.CharField(max_length=30, blank=True, help_text="What the reviewer did")

    class Meta:
        ordering = ["halted_at"]


class Edit(models.Model):
    KINDS = [
        ("replace", "replace"),
        ("choose", "choose"),
        ("truncate", "truncate"),
        ("append", "append"),
    ]

    session = models.ForeignKey(ReviewSession, on_delete=models.CASCADE, related_name="edits")
    pause = models.ForeignKey(PauseEvent, on_delete=models.CASCADE, related_name="edits", null=True)
    kind = models.CharField(max_length=10, choices=KINDS)
    start = models.PositiveIntegerField(
        null=True, help_text="Character offset (replace) or token position"
    )
    end = models.PositiveIntegerField(null=True)
    token_id = models.IntegerField(null=True, blank=True)
    text_before = models.TextField(blank=True)
    text_after = models.TextField(blank=True)
    glossary_term = models.ForeignKey(
        GlossaryTerm, on_delete=models.SET_NULL, null=True, blank=True
    )
    author = models.ForeignKey("auth.User", on_delete=models.PROTECT)
    applied = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def as_dict(self) -> dict:
        """The one serialisation of an edit: the API's answer and the audit record's."""
        return {
            "id": self.pk,
            "pause": self.pause_id,
            "kind": self.kind,
            "start": self.start,
            "end": self.end,
            "token_id": self.token_id,
            "text_before": self.text_before,
            "text_after": self.text_after,
            "glossary_term": self.glossary_term_id,
            "author": self.author.username,
            "applied": self.applied,
            "error": self.error,
            "created_at": self.created_at.isoformat(),
        }


class SessionEvent(models.Model):
    """What the browser saw, numbered per session, so a client that missed one can catch up."""

    session = models.ForeignKey(ReviewSession, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=20)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "seq"]
        unique_together = [("session", "seq")]

    def to_message(self) -> dict:
        return {"type": self.type, "seq": self.seq, "session": self.session_id, **self.payload}


class CommandReceipt(models.Model):
    """A client command id seen once; a repeat (double click, retry) gets the first answer."""

    session = models.ForeignKey(
        ReviewSession, on_delete=models.CASCADE, related_name="receipts", null=True
    )
    user = models.ForeignKey("auth.User", on_delete=models.CASCADE)
    command_id = models.CharField(max_length=100)
    command = models.CharField(max_length=20)
    result = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        unique_together = [("user", "command_id")]


class AuditRecord(models.Model):
    """Append-only hash chain: each record's hash covers its content and its predecessor's hash."""

    session = models.ForeignKey(
        ReviewSession, on_delete=models.SET_NULL, null=True, related_name="audit"
    )
    actor = models.CharField(max_length=150, help_text="Username, or 'engine'")
    action = models.CharField(max_length=40)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField()
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["id"]


class ApiToken(models.Model):
    user = models.OneToOneField("auth.User", on_delete=models.CASCADE, related_name="api_token")
    key = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"API token of {self.user}"


class RoiSettings(models.Model):
    """What an admin assumes when Pause ROI is computed for a domain; shown beside every figure."""

    domain = models.OneToOneField(Domain, on_delete=models.CASCADE, related_name="roi_settings")
    baseline_regenerate_cycles = models.FloatField(
        default=1.0,
        help_text="Generate → review → regenerate cycles one generation needed before pausing",
    )
    minutes_saved_per_cycle = models.FloatField(
        default=10.0, help_text="Reviewer minutes one avoided regenerate cycle saves"
    )
    reviewer_hourly_cost = models.DecimalField(max_digits=10, decimal_places=2, default=100)
    loss_avoided_per_interception = models.DecimalField(
        max_digits=12, decimal_places=2, default=0, help_text="Cost of an error a policy caught"
    )
    annual_system_cost = models.DecimalField(max_digits=12, decimal_places=2, default=0)
    currency = models.CharField(max_length=3, default="USD")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "ROI settings"
        verbose_name_plural = "ROI settings"

    def __str__(self) -> str:
        return f"ROI settings of {self.domain}"


class TaskDecoding(models.Model):
    """A domain's decoding parameters for one task type, over the built-in preset."""

    TASK_TYPES = [("deterministic", "deterministic"), ("open", "open"), ("reasoning", "reasoning")]

    domain = models.ForeignKey(Domain, on_delete=models.CASCADE, related_name="task_decodings")
    task_type = models.CharField(max_length=20, choices=TASK_TYPES)
    params = models.JSONField(
        default=dict, blank=True, help_text='Sampling parameters, e.g. {"temperature": 0.2}'
    )

    class Meta:
        ordering = ["domain", "task_type"]
        unique_together = [("domain", "task_type")]
        verbose_name = "task decoding preset"

    def __str__(self) -> str:
        return f"{self.domain}: {self.task_type}"

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        from inference.config import SamplingConfigError, SamplingParams

        try:
            SamplingParams.for_task(self.task_type, **(self.params or {}))
        except (SamplingConfigError, TypeError) as exc:
            raise ValidationError(str(exc)) from exc


class PauseModelVersion(models.Model):
    """A trained learned-policy model: its bytes, so any worker can write the file back, and
    the held-out metrics it was chosen by."""

    domain = models.ForeignKey(Domain, on_delete=models.CASCADE, related_name="pause_models")
    version = models.PositiveIntegerField(help_text="1, 2, ... per domain")
    checksum = models.CharField(max_length=64, help_text="SHA-256 of the model bytes")
    data = models.BinaryField()
    metrics = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, help_text="Who trained it")

    class Meta:
        ordering = ["domain", "-version"]
        unique_together = [("domain", "version")]

    def __str__(self) -> str:
        return f"{self.domain} pause model v{self.version} ({self.checksum[:12]})"
