"""What is kept about people and their access: the audit chain and API tokens."""

from __future__ import annotations

from django.db import models


class AuditRecord(models.Model):
    """Append-only hash chain: each record's hash covers its content and its predecessor's hash."""

    session = models.ForeignKey(
        "reviewer.ReviewSession", on_delete=models.SET_NULL, null=True, related_name="audit"
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
