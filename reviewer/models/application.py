"""An application: a program that calls the review gateway (/v1/) with a key of its own."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from reviewer.models.domain import Domain


class ApplicationQuerySet(models.QuerySet["Application"]):
    def active(self) -> ApplicationQuerySet:
        return self.filter(revoked_at__isnull=True)


class Application(models.Model):
    """A principal distinct from reviewers: it starts generations in the domains it is bound
    to and sees only its own. Only a SHA-256 digest of its key is kept (shown once)."""

    name = models.CharField(_("name"), max_length=100, unique=True)
    domains = models.ManyToManyField(
        Domain, blank=True, related_name="applications", verbose_name=_("domains")
    )
    key_digest = models.CharField(max_length=64, unique=True, editable=False)
    key_prefix = models.CharField(
        _("key prefix"),
        max_length=16,
        editable=False,
        help_text=_("The key's first characters, to recognise it"),
    )
    max_concurrent = models.PositiveSmallIntegerField(
        _("concurrent generations"),
        default=4,
        validators=[MinValueValidator(1), MaxValueValidator(1000)],
        help_text=_("Generations not yet ended at once; one more is refused with 429"),
    )
    requests_per_minute = models.PositiveIntegerField(
        _("requests per minute"),
        default=60,
        validators=[MinValueValidator(1), MaxValueValidator(100000)],
        help_text=_("Requests in any minute; one more is refused with 429 and Retry-After"),
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    rotated_at = models.DateTimeField(_("rotated at"), null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(_("revoked at"), null=True, blank=True, editable=False)

    objects = ApplicationQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        verbose_name = _("application")
        verbose_name_plural = _("applications")

    def __str__(self) -> str:
        return self.name

    @property
    def actor(self) -> str:
        """How the audit chain names it (reviewers are named by username)."""
        return f"app:{self.name}"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None
