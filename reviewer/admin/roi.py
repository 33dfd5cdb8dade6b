"""Admin pages for what Pause ROI and task-aware decoding assume per domain."""

from __future__ import annotations

from django.contrib import admin

from reviewer.admin.audited import AuditedChanges
from reviewer.models import RoiSettings, TaskDecoding


@admin.register(RoiSettings)
class RoiSettingsAdmin(AuditedChanges[RoiSettings]):
    list_display = [
        "domain",
        "baseline_regenerate_cycles",
        "minutes_saved_per_cycle",
        "reviewer_hourly_cost",
        "loss_avoided_per_interception",
        "annual_system_cost",
        "currency",
        "updated_at",
    ]
    list_select_related = ["domain"]


@admin.register(TaskDecoding)
class TaskDecodingAdmin(AuditedChanges[TaskDecoding]):
    """Per-domain overrides of the decoding preset a task type gets (validated on save)."""

    list_display = ["domain", "task_type", "params"]
    list_filter = ["task_type", "domain"]
    list_select_related = ["domain"]
