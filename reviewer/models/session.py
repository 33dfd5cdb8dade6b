"""A review session and what happens in it: pauses, edits, events, command receipts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import models
from django.utils.translation import gettext, gettext_noop
from django.utils.translation import gettext_lazy as _

from reviewer.models import statuses
from reviewer.models.domain import TASK_TYPES, Domain, GlossaryTerm, policy_kind_word

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from reviewer.models.application import Application

DEFAULT_MAX_NEW_TOKENS = 200  # for a row whose decoding names none (the former column default)

# A session's name in a list or a breadcrumb ("Session 5 (running)") says its stored status:
# the label, but the shorter "generated".
STATUS_WORDS = {**statuses.LABELS, statuses.GENERATED: gettext_noop("generated")}


class SessionQuerySet(models.QuerySet["ReviewSession"]):
    def visible_to(self, user: User) -> SessionQuerySet:
        """Staff see every session; a reviewer their own and the ownerless (gateway) sessions
        of their domains."""
        if user.is_staff:
            return self
        floor = models.Q(owner__isnull=True, domain__reviewers=user)
        return self.filter(models.Q(owner=user) | floor).distinct()

    def of_application(self, application: Application) -> SessionQuerySet:
        return self.filter(application=application)

    def running(self) -> SessionQuerySet:
        return self.filter(status=ReviewSession.RUNNING)

    def paused(self) -> SessionQuerySet:
        return self.filter(status=ReviewSession.PAUSED)


class ReviewSession(models.Model):
    """One generation under review. Its statuses and transitions: reviewer/models/statuses.py; the
    transitions are made in reviewer.lifecycle, nowhere else."""

    DRAFT, RUNNING, PAUSED, GENERATED = (
        statuses.DRAFT,
        statuses.RUNNING,
        statuses.PAUSED,
        statuses.GENERATED,
    )
    COMPLETED, REJECTED, CANCELLED, FAILED = (
        statuses.COMPLETED,
        statuses.REJECTED,
        statuses.CANCELLED,
        statuses.FAILED,
    )
    STATUSES = [(status, _(label)) for status, label in statuses.LABELS.items()]
    FINAL = statuses.FINAL

    # A reviewer-started session has an owner; a gateway generation has an application and
    # no owner: it waits in its domain's queue until a reviewer claims it.
    owner = models.ForeignKey(
        "auth.User",
        on_delete=models.PROTECT,
        related_name="review_sessions",
        null=True,
        blank=True,
        verbose_name=_("owner"),
    )
    application = models.ForeignKey(
        "reviewer.Application",
        on_delete=models.PROTECT,
        related_name="sessions",
        null=True,
        blank=True,
        verbose_name=_("application"),
    )
    claimed_by = models.ForeignKey(
        "auth.User",
        on_delete=models.SET_NULL,
        related_name="claimed_sessions",
        null=True,
        blank=True,
        verbose_name=_("claimed by"),
    )
    claim_expires_at = models.DateTimeField(_("claim expires at"), null=True, blank=True)
    waiting_since = models.DateTimeField(
        _("waiting since"),
        null=True,
        blank=True,
        help_text=_("When it began to wait for a reviewer (paused, generated)"),
    )
    gateway = models.JSONField(
        _("gateway"),
        default=dict,
        blank=True,
        help_text=_("The gateway request it came from: endpoint, messages, stop, logprobs, ..."),
    )
    released_chars = models.PositiveIntegerField(
        _("released chars"),
        default=0,
        help_text=_("Delayed delivery: characters of text already sent (locked)"),
    )
    # What tells a repeated gateway call from a new one (reviewer/lifecycle/gateway.py).
    request_digest = models.CharField(
        _("request digest"),
        max_length=64,
        blank=True,
        help_text=_("SHA-256 of the gateway call's endpoint and body"),
    )
    idempotency_key = models.CharField(
        _("idempotency key"),
        max_length=200,
        null=True,
        blank=True,
        help_text=_("The call's Idempotency-Key header"),
    )
    answered_at = models.DateTimeField(
        _("answered at"),
        null=True,
        blank=True,
        help_text=_("When the call that started it got its whole answer"),
    )
    domain = models.ForeignKey(
        Domain, on_delete=models.PROTECT, related_name="sessions", verbose_name=_("domain")
    )
    input_text = models.TextField(_("input text"))
    model_name = models.CharField(_("model name"), max_length=200)
    decoding = models.JSONField(_("decoding"), default=dict)
    policy_specs = models.JSONField(_("policy specs"), default=list)
    pause_budget = models.JSONField(
        _("pause budget"),
        default=dict,
        blank=True,
        help_text=_("The domain's pause budget when it started"),
    )
    muted_policies = models.JSONField(
        _("muted policies"),
        default=list,
        blank=True,
        help_text=_("Policies its reviewer silenced for this session"),
    )
    pending_note = models.TextField(
        _("pending note"),
        blank=True,
        help_text=_("Context the model reads when its next segment starts (the time)"),
    )
    status = models.CharField(
        _("status"), max_length=12, choices=STATUSES, default=DRAFT, db_index=True
    )
    prompt_ids = models.JSONField(_("prompt ids"), default=list)
    generated_ids = models.JSONField(_("generated ids"), default=list)
    text = models.TextField(_("text"), blank=True)
    engine_meta = models.JSONField(
        _("engine meta"), default=dict, blank=True, help_text=_("Attempts, policy state")
    )
    ids_seq = models.PositiveIntegerField(
        _("ids seq"), default=0, help_text=_("Last event covered by generated_ids")
    )
    last_seq = models.PositiveIntegerField(_("last seq"), default=0)
    worker = models.CharField(
        _("worker"), max_length=200, blank=True, help_text=_("Worker holding the state")
    )
    segment = models.CharField(
        _("segment"), max_length=32, blank=True, help_text=_("Token of the live segment task")
    )
    error = models.TextField(_("error"), blank=True)
    error_message = models.JSONField(
        _("error message"),
        default=dict,
        blank=True,
        help_text=_("The error's template and values, to show it in the reader's language"),
    )
    decision_comment = models.TextField(_("decision comment"), blank=True)
    # Kept as named at the decision: the session still says who reviewed it once the account
    # that claimed it is gone (claimed_by is cleared with it).
    decided_by = models.CharField(
        _("decided by"),
        max_length=150,
        blank=True,
        help_text=_("The reviewer who approved or rejected it; empty for the system's approval"),
    )
    task_type = models.CharField(
        _("task type"),
        max_length=20,
        blank=True,
        choices=TASK_TYPES,
        help_text=_("Decides the decoding"),
    )
    task_source = models.CharField(
        _("task source"), max_length=10, blank=True, help_text=_("'classifier' or 'override'")
    )
    # Which classifier labelled it, so that its live accuracy is the version's in use. Null:
    # a session from before this was kept.
    task_classifier_version = models.PositiveIntegerField(
        _("task classifier version"),
        null=True,
        blank=True,
        default=0,
        help_text=_("The classifier version that labelled it (0: the shipped one)"),
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)

    objects = SessionQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]
        verbose_name = _("review session")
        verbose_name_plural = _("review sessions")
        constraints = [
            models.UniqueConstraint(
                fields=["application", "idempotency_key"],
                condition=models.Q(idempotency_key__isnull=False),
                name="one_generation_per_idempotency_key",
            )
        ]
        indexes = [models.Index(fields=["application", "request_digest"])]

    def __str__(self) -> str:
        word = gettext(STATUS_WORDS.get(self.status, self.status))
        return gettext("Session %(id)s (%(status)s)") % {"id": self.pk, "status": word}

    # The seed and the token limit are sampling parameters, kept once: in ``decoding``.
    @property
    def seed(self) -> int:
        return int(self.decoding.get("seed", 0))

    @seed.setter
    def seed(self, value: int) -> None:
        self.decoding = {**self.decoding, "seed": value}

    @property
    def max_new_tokens(self) -> int:
        return int(self.decoding.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS))

    @max_new_tokens.setter
    def max_new_tokens(self, value: int) -> None:
        self.decoding = {**self.decoding, "max_new_tokens": value}

    @property
    def case_text(self) -> str:
        """The input as a reviewer reads it: without the anchor markup the engine reads."""
        from reviewer.lifecycle.gate import case_text

        return case_text(self.input_text)[0]

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL

    @property
    def from_gateway(self) -> bool:
        return self.application_id is not None

    @property
    def reviewer_name(self) -> str:
        """Who reviews it: the owner, else the reviewer who claimed it ('' before a claim), else
        whoever decided it (a claimant whose account was deleted since)."""
        person = self.owner or self.claimed_by
        return person.username if person is not None else self.decided_by


class PauseEvent(models.Model):
    # The kind of a pause a reviewer opened on a generated text to correct it: no engine
    # halted there, so the pause figures (ROI, the floor, the learned policy) leave it out.
    REOPENED = "reopen"
    # The stored words the admin shows in the page's language (English: as stored); the
    # policies' kinds are reviewer.models.domain.POLICY_KIND_WORDS. Others show as stored.
    OWN_KINDS = {"manual": _("manual"), REOPENED: _("reopen")}
    OUTCOMES = {
        "resumed": _("resumed"),
        "edited": _("edited"),
        "rolled back": _("rolled back"),
        "completed": _("completed"),
        "rejected": _("rejected"),
        "cancelled": _("cancelled"),
    }

    session = models.ForeignKey(
        ReviewSession, on_delete=models.CASCADE, related_name="pauses", verbose_name=_("session")
    )
    position = models.PositiveIntegerField(
        _("position"), help_text=_("Generated tokens before the pause")
    )
    trigger = models.CharField(
        _("trigger"), max_length=100, help_text=_("'manual' or the policy's name")
    )
    kind = models.CharField(
        _("kind"), max_length=30, blank=True, help_text=_("Policy kind, or 'manual'")
    )
    reason = models.TextField(_("reason"))
    evidence = models.JSONField(_("evidence"), default=dict)
    alternatives = models.JSONField(_("alternatives"), default=list)
    attention = models.JSONField(_("attention"), default=dict)
    requested_at = models.DateTimeField(_("requested at"), null=True, blank=True)
    halted_at = models.DateTimeField(_("halted at"))
    resumed_at = models.DateTimeField(_("resumed at"), null=True, blank=True)
    latency_ms = models.FloatField(
        _("latency ms"), null=True, blank=True, help_text=_("Manual pause: request to halt")
    )
    outcome = models.CharField(
        _("outcome"), max_length=30, blank=True, help_text=_("What the reviewer did")
    )

    class Meta:
        ordering = ["halted_at"]
        verbose_name = _("pause event")
        verbose_name_plural = _("pause events")

    def __str__(self) -> str:
        return gettext("Pause event %(id)s") % {"id": self.pk}

    @classmethod
    def trigger_word(cls, trigger: str) -> str:
        return str(cls.OWN_KINDS["manual"]) if trigger == "manual" else trigger

    @classmethod
    def kind_word(cls, kind: str) -> str:
        own = cls.OWN_KINDS.get(kind)
        return str(own) if own is not None else policy_kind_word(kind)

    @classmethod
    def outcome_word(cls, outcome: str) -> str:
        return str(cls.OUTCOMES.get(outcome, outcome))


class Edit(models.Model):
    KINDS = [
        ("replace", _("replace")),
        ("choose", _("choose")),
        ("truncate", _("truncate")),
        ("append", _("append")),
    ]

    session = models.ForeignKey(
        ReviewSession, on_delete=models.CASCADE, related_name="edits", verbose_name=_("session")
    )
    pause = models.ForeignKey(
        PauseEvent,
        on_delete=models.CASCADE,
        related_name="edits",
        null=True,
        verbose_name=_("pause"),
    )
    kind = models.CharField(_("kind"), max_length=10, choices=KINDS)
    start = models.PositiveIntegerField(
        _("start"), null=True, help_text=_("Character offset (replace) or token position")
    )
    end = models.PositiveIntegerField(_("end"), null=True)
    token_id = models.IntegerField(_("token id"), null=True, blank=True)
    text_before = models.TextField(_("text before"), blank=True)
    text_after = models.TextField(_("text after"), blank=True)
    glossary_term = models.ForeignKey(
        GlossaryTerm,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        verbose_name=_("glossary term"),
    )
    # The term's code as it was when the reviewer chose it: the redline of a decided session
    # must not change when the glossary is edited or re-imported, or the term deleted.
    glossary_code = models.CharField(
        _("glossary code"),
        max_length=50,
        null=True,
        blank=True,
        help_text=_("The glossary term's code when the edit was made; none: no glossary term"),
    )
    author = models.ForeignKey("auth.User", on_delete=models.PROTECT, verbose_name=_("author"))
    applied = models.BooleanField(_("applied"), default=False)
    error = models.TextField(_("error"), blank=True)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = _("edit")
        verbose_name_plural = _("edits")

    def __str__(self) -> str:
        return gettext("Edit %(id)s") % {"id": self.pk}

    def as_dict(self) -> dict[str, Any]:
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

    def to_message(self) -> dict[str, Any]:
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
