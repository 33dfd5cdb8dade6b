"""What is kept about people and their access: the audit chain and API tokens."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _


class AuditRecord(models.Model):
    """Append-only hash chain: each record's hash covers its content and its predecessor's hash."""

    # A record's hash covers its session's id: a session with records is never deleted (a
    # cleared link would break the chain at that record).
    session = models.ForeignKey(
        "reviewer.ReviewSession",
        on_delete=models.PROTECT,
        null=True,
        related_name="audit",
        verbose_name=_("session"),
    )
    actor = models.CharField(_("actor"), max_length=150, help_text=_("Username, or 'engine'"))
    action = models.CharField(_("action"), max_length=40)
    payload = models.JSONField(_("payload"), default=dict)
    created_at = models.DateTimeField(_("created at"))
    prev_hash = models.CharField(_("prev hash"), max_length=64)
    hash = models.CharField(_("hash"), max_length=64, unique=True)

    class Meta:
        ordering = ["id"]
        verbose_name = _("audit record")
        verbose_name_plural = _("audit records")

    def __str__(self) -> str:
        return gettext("Audit record %(id)s") % {"id": self.pk}


class AuditGraph(models.Model):
    """Why a pause, a rollback, a flag or a failure happened: a small causal graph built from the
    stored records, kept with its digest. Each version is hashed into the chain by an
    ``audit_graph`` record naming this row, so an edited graph no longer matches it."""

    SUBJECTS = [
        ("pause", "pause"),
        ("rollback", "rollback"),
        ("flag", "flag"),
        ("failure", "failure"),
    ]

    session = models.ForeignKey(
        "reviewer.ReviewSession", on_delete=models.CASCADE, related_name="audit_graphs"
    )
    subject = models.CharField(max_length=10, choices=SUBJECTS)
    pause = models.OneToOneField(
        "reviewer.PauseEvent", on_delete=models.CASCADE, null=True, related_name="audit_graph"
    )
    record = models.OneToOneField(
        AuditRecord,
        on_delete=models.PROTECT,
        related_name="graph",
        help_text="The chain's record of what the graph explains (paused, flagged, ...)",
    )
    position = models.PositiveIntegerField(help_text="Generated tokens when it happened")
    graph = models.JSONField(default=dict)
    digest = models.CharField(max_length=64, help_text="SHA-256 of the graph as hashed")
    complete = models.BooleanField(
        default=False, help_text="The reviewer's actions that followed are in it"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["record_id"]


class ApiToken(models.Model):
    user = models.OneToOneField(
        "auth.User", on_delete=models.CASCADE, related_name="api_token", verbose_name=_("user")
    )
    key = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("api token")
        verbose_name_plural = _("api tokens")

    def __str__(self) -> str:
        return gettext("API token of %(user)s") % {"user": self.user}
