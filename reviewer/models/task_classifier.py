"""What the task classifier learns from: reviewers' corrections of a session's task type, and
the classifier versions retrained on them (enabled only when good enough)."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from reviewer.models.domain import TASK_TYPES
from reviewer.models.session import ReviewSession


class TaskCorrection(models.Model):
    """A reviewer's word on a session's task type: the label the classifier (or whoever
    started the session) gave, and the one the reviewer says is right. One per session; a
    later correction replaces it (the audit chain keeps every one)."""

    session = models.OneToOneField(
        ReviewSession,
        on_delete=models.CASCADE,
        related_name="task_correction",
        verbose_name=_("session"),
    )
    given = models.CharField(
        _("given"),
        max_length=20,
        choices=TASK_TYPES,
        help_text=_("The session's task type when corrected"),
    )
    corrected = models.CharField(_("corrected"), max_length=20, choices=TASK_TYPES)
    corrected_by = models.CharField(_("corrected by"), max_length=150)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        verbose_name = _("task correction")
        verbose_name_plural = _("task corrections")

    def __str__(self) -> str:
        given, corrected = self.get_given_display(), self.get_corrected_display()
        named = {"id": self.session_id, "given": given, "corrected": corrected}
        return gettext("session %(id)s: %(given)s -> %(corrected)s") % named

    @property
    def agrees(self) -> bool:
        return self.given == self.corrected


class TaskClassifierVersion(models.Model):
    """A retrained classifier. Naive Bayes refits from its examples in milliseconds and
    always to the same model, so a version stores its training examples (JSON bytes) and
    their checksum rather than the fitted tables."""

    version = models.PositiveIntegerField(_("version"), unique=True, help_text=_("1, 2, ..."))
    checksum = models.CharField(
        _("checksum"), max_length=64, help_text=_("SHA-256 of the examples")
    )
    data = models.BinaryField()
    metrics = models.JSONField(_("metrics"), default=dict)
    enabled = models.BooleanField(
        _("enabled"),
        default=False,
        help_text=_("Labels new sessions; only with held-out accuracy >= 88 %"),
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    created_by = models.CharField(_("created by"), max_length=150, help_text=_("Who trained it"))

    class Meta:
        ordering = ["-version"]
        verbose_name = _("task classifier version")
        verbose_name_plural = _("task classifier versions")

    def __str__(self) -> str:
        return gettext("task classifier v%(version)s (%(checksum)s)") % {
            "version": self.version,
            "checksum": self.checksum[:12],
        }

    @property
    def accuracy(self) -> float:
        return float(self.metrics.get("accuracy", 0.0))
