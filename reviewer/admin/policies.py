"""The admin of pause policies: a form per kind, trying a policy on sample text and
calibrating it on the domain's recent sessions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils.translation import gettext_lazy as _

from inference.policies import POLICY_KINDS, PolicyConfigError
from reviewer.admin.audited import AuditedChanges
from reviewer.analytics import pause_models
from reviewer.analytics.calibration import RECENT_SESSIONS, Calibration, calibrate
from reviewer.analytics.policy_trial import Trial, try_policies
from reviewer.models import (
    PausePolicy,
)
from reviewer.web.policy_forms import (
    KIND_DESCRIPTIONS,
    is_text_kind,
    kind_label,
    param_field_names,
    policy_form_for,
)
from reviewer.web.ui_text import error_text

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldOpts, _FieldsetSpec


class KindFilter(admin.SimpleListFilter):
    title = _("kind")
    parameter_name = "kind"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        return [(kind, kind_label(kind)) for kind in POLICY_KINDS]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[PausePolicy]
    ) -> QuerySet[PausePolicy]:
        return queryset.filter(kind=self.value()) if self.value() else queryset


@admin.register(PausePolicy)
class PausePolicyAdmin(AuditedChanges[PausePolicy]):
    """One form per policy kind, generated from the engine's parameter schema.

    Adding a policy starts by choosing its kind (`?kind=...`); the kind of a saved policy
    does not change, because its parameters mean nothing to another kind.
    """

    list_display = ["name", "domain", "kind_name", "action", "enabled", "cooldown", "order"]
    list_filter = ["domain", KindFilter, "action", "enabled"]
    list_editable = ["enabled", "order"]
    search_fields = ["name"]
    readonly_fields = ["kind_name"]
    change_form_template = "admin/reviewer/pausepolicy/change_form.html"

    @admin.display(description=_("kind"), ordering="kind")
    def kind_name(self, obj: PausePolicy) -> str:
        return kind_label(obj.kind)

    def policy_kind(self, request: HttpRequest, obj: PausePolicy | None) -> str | None:
        kind = obj.kind if obj is not None else request.GET.get("kind")
        return kind if kind in POLICY_KINDS else None

    def get_form(
        self,
        request: HttpRequest,
        obj: PausePolicy | None = None,
        change: bool = False,
        **kwargs: Any,
    ) -> type[forms.ModelForm[PausePolicy]]:
        kind = self.policy_kind(request, obj)
        if kind is not None:
            kwargs["form"] = policy_form_for(kind)
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fieldsets(self, request: HttpRequest, obj: PausePolicy | None = None) -> _FieldsetSpec:
        kind = self.policy_kind(request, obj)
        general = [
            "name",
            "name_zh",
            "domain",
            "kind_name",
            "action",
            "enabled",
            "cooldown",
            "order",
        ]
        general += ["priority", "may_pause_before_first_word"]
        if kind is None:
            return [(None, {"fields": tuple(general)})]
        description = KIND_DESCRIPTIONS.get(kind, "")
        parameters: _FieldOpts = {
            "fields": tuple(param_field_names(kind)),
            "description": description,
        }
        return [(None, {"fields": tuple(general)}), (_("Parameters"), parameters)]

    def add_view(
        self,
        request: HttpRequest,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        if self.policy_kind(request, None) is None:
            return self.choose_kind_view(request)
        extra = {**(extra_context or {}), "policy_kind_label": kind_label(request.GET["kind"])}
        return super().add_view(request, form_url, extra)

    def choose_kind_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_add_permission(request):
            raise PermissionDenied
        kinds = [
            {
                "kind": kind,
                "label": kind_label(kind),
                "description": KIND_DESCRIPTIONS.get(kind, ""),
                "text_only": is_text_kind(kind),
            }
            for kind in POLICY_KINDS
        ]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": _("Choose the kind of pause policy"),
            "kinds": kinds,
            "preserved_query": request.GET.urlencode(),
        }
        return TemplateResponse(request, "admin/reviewer/pausepolicy/choose_kind.html", context)

    def save_model(self, request: HttpRequest, obj: PausePolicy, form: Any, change: bool) -> None:
        before = PausePolicy.objects.filter(pk=obj.pk).first() if change else None
        super().save_model(request, obj, form, change)
        if pause_models.goes_live(before, obj):
            pause_models.record_enabled(obj, request.user.get_username())

    def get_urls(self) -> list[URLPattern]:
        trial = path(
            "<path:object_id>/try/",
            self.admin_site.admin_view(self.try_view),
            name="reviewer_pausepolicy_try",
        )
        return [trial, *super().get_urls()]

    def try_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Dry run over sample text: where this policy (or the domain's) would pause, and why."""
        policy = self.get_object(request, object_id)
        if policy is None:
            raise Http404
        if not self.has_view_permission(request, policy):
            raise PermissionDenied
        form = PolicyTrialForm(request.POST or None)
        trial, error = None, ""
        if request.method == "POST" and form.is_valid():
            trial, error = self.run_trial(policy, form.cleaned_data)
        replay_form = CalibrationForm(request.GET if "replay" in request.GET else None)
        calibration = None
        if replay_form.is_valid():
            calibration, error = self.run_calibration(policy, replay_form.cleaned_data)
        elif not replay_form.is_bound and request.method == "GET" and not is_text_kind(policy.kind):
            # nothing to type for a signal policy: its history is the only trial it has
            calibration, error = self.run_calibration(policy, CalibrationForm.DEFAULTS)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": policy,
            "title": _("Try the policy %(name)s") % {"name": policy.name},
            "form": form,
            "trial": trial,
            "error": error,
            "replay_form": replay_form if replay_form.is_bound else CalibrationForm(),
            "calibration": calibration,
            "kind_label": kind_label(policy.kind),
            "text_only": is_text_kind(policy.kind),
        }
        return TemplateResponse(request, "admin/reviewer/pausepolicy/try.html", context)

    def run_trial(self, policy: PausePolicy, data: dict[str, Any]) -> tuple[Trial | None, str]:
        try:
            specs, budget = trial_specs(policy, data["whole_domain"]), policy.domain.pause_budget()
            return try_policies(specs, data["text"], budget), ""
        except PolicyConfigError as exc:
            return None, error_text(exc)

    def run_calibration(
        self, policy: PausePolicy, data: dict[str, Any]
    ) -> tuple[Calibration | None, str]:
        specs = trial_specs(policy, data["whole_domain"])
        try:
            return calibrate(specs, policy.domain, data["sessions"]), ""
        except PolicyConfigError as exc:
            return None, error_text(exc)


def trial_specs(policy: PausePolicy, whole_domain: bool) -> list[dict[str, Any]]:
    """The policy alone (even while disabled), or the domain's enabled ones together."""
    if whole_domain:
        return [p.to_spec() for p in policy.domain.policies.filter(enabled=True)]
    return [{**policy.to_spec(), "enabled": True}]


class PolicyTrialForm(forms.Form):
    text = forms.CharField(
        label=_("Sample text"),
        widget=forms.Textarea(attrs={"rows": 8, "cols": 80}),
        strip=False,
        max_length=20000,
    )
    whole_domain = forms.BooleanField(
        label=_("Try all enabled policies of this domain together"), required=False
    )


class CalibrationForm(forms.Form):
    DEFAULTS = {"sessions": RECENT_SESSIONS, "whole_domain": False}

    replay = forms.CharField(widget=forms.HiddenInput, initial="1")
    sessions = forms.IntegerField(
        label=_("Recent sessions"), min_value=1, max_value=200, initial=RECENT_SESSIONS
    )
    whole_domain = forms.BooleanField(
        label=_("Replay all enabled policies of this domain together"), required=False
    )
