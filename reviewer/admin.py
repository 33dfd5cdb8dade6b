from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.text import slugify
from django.utils.translation import gettext_lazy as _

from inference.policies import POLICY_KINDS, PolicyConfigError
from reviewer.analytics import pause_models
from reviewer.analytics.calibration import RECENT_SESSIONS, Calibration, calibrate
from reviewer.analytics.policy_trial import Trial, try_policies
from reviewer.documents.glossary_csv import GlossaryImportError, export_csv, import_csv
from reviewer.models import (
    ApiToken,
    AuditRecord,
    Domain,
    Edit,
    Glossary,
    GlossaryTerm,
    PauseEvent,
    PausePolicy,
    ReviewSession,
)
from reviewer.web import auth
from reviewer.web.policy_forms import (
    KIND_DESCRIPTIONS,
    is_text_kind,
    kind_label,
    param_field_names,
    policy_form_for,
)


class GlossaryTermInline(admin.TabularInline):
    model = GlossaryTerm
    extra = 1


@admin.register(Domain)
class DomainAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "name_zh",
        "specialty",
        "max_pauses_per_100_tokens",
        "min_pause_distance",
    ]
    prepopulated_fields = {"slug": ["name"]}
    fieldsets = [
        (None, {"fields": ["name", "name_zh", "slug", "specialty", "system_prompt", "decoding"]}),
        (
            _("Pauses"),
            {
                "fields": [
                    "max_pauses_per_100_tokens",
                    "min_pause_distance",
                    "resume_time_after_s",
                ],
                "description": _(
                    "Pauses interrupt a reviewer: policies may spend only this budget. A"
                    " policy pause over it is kept as a flag in the session's timeline."
                ),
            },
        ),
    ]


class GlossaryImportForm(forms.Form):
    file = forms.FileField(
        label=_("CSV file"),
        help_text=_("Columns term, preferred, code, note, with a header row; UTF-8."),
    )
    replace = forms.BooleanField(
        label=_("Replace the glossary"),
        required=False,
        help_text=_("Delete the terms that are not in the file."),
    )


@admin.register(Glossary)
class GlossaryAdmin(admin.ModelAdmin):
    """Terms are edited inline, or imported and exported as CSV from the glossary's page."""

    list_display = ["name", "domain", "term_count"]
    list_filter = ["domain"]
    inlines = [GlossaryTermInline]
    change_form_template = "admin/reviewer/glossary/change_form.html"

    @admin.display(description=_("terms"))
    def term_count(self, obj: Glossary) -> int:
        return obj.terms.count()

    def get_urls(self) -> list:
        own = [
            path(
                "<path:object_id>/export/",
                self.admin_site.admin_view(self.export_view),
                name="reviewer_glossary_export",
            ),
            path(
                "<path:object_id>/import/",
                self.admin_site.admin_view(self.import_view),
                name="reviewer_glossary_import",
            ),
        ]
        return own + super().get_urls()

    def export_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        glossary = self.glossary_or_404(request, object_id, self.has_view_permission)
        response = HttpResponse(export_csv(glossary), content_type="text/csv; charset=utf-8")
        filename = f"{glossary.domain.slug}-{slugify(glossary.name) or glossary.pk}.csv"
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response

    def import_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        glossary = self.glossary_or_404(request, object_id, self.has_change_permission)
        form = GlossaryImportForm(request.POST or None, request.FILES or None)
        errors: list[str] = []
        if request.method == "POST" and form.is_valid():
            errors = self.import_file(request, glossary, form)
            if not errors:
                return redirect("admin:reviewer_glossary_change", glossary.pk)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": glossary,
            "title": _("Import terms into %(glossary)s") % {"glossary": glossary},
            "form": form,
            "import_errors": errors,
        }
        return TemplateResponse(request, "admin/reviewer/glossary/import.html", context)

    def import_file(self, request: HttpRequest, glossary: Glossary, form) -> list[str]:
        """Import the uploaded file; the problems found, or [] after a success message."""
        data = form.cleaned_data["file"].read()
        try:
            result = import_csv(glossary, data, replace=form.cleaned_data["replace"])
        except GlossaryImportError as exc:
            return exc.errors
        message = _("Imported: %(created)d new, %(updated)d updated, %(deleted)d deleted.")
        self.message_user(request, message % vars(result), messages.SUCCESS)
        return []

    def glossary_or_404(self, request: HttpRequest, object_id: str, allowed) -> Glossary:
        glossary = self.get_object(request, object_id)
        if glossary is None:
            raise Http404
        if not allowed(request, glossary):
            raise PermissionDenied
        return glossary


class KindFilter(admin.SimpleListFilter):
    title = _("kind")
    parameter_name = "kind"

    def lookups(self, request, model_admin) -> list[tuple[str, str]]:
        return [(kind, kind_label(kind)) for kind in POLICY_KINDS]

    def queryset(self, request, queryset):
        return queryset.filter(kind=self.value()) if self.value() else queryset


@admin.register(PausePolicy)
class PausePolicyAdmin(admin.ModelAdmin):
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

    def get_form(self, request: HttpRequest, obj=None, change=False, **kwargs):
        kind = self.policy_kind(request, obj)
        if kind is not None:
            kwargs["form"] = policy_form_for(kind)
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fieldsets(self, request: HttpRequest, obj=None) -> list:
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
            return [(None, {"fields": general})]
        description = KIND_DESCRIPTIONS.get(kind, "")
        parameters = {"fields": param_field_names(kind), "description": description}
        return [(None, {"fields": general}), (_("Parameters"), parameters)]

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context=None):
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

    def save_model(self, request: HttpRequest, obj: PausePolicy, form, change: bool) -> None:
        before = PausePolicy.objects.filter(pk=obj.pk).first() if change else None
        super().save_model(request, obj, form, change)
        if pause_models.goes_live(before, obj):
            pause_models.record_enabled(obj, request.user.get_username())

    def get_urls(self) -> list:
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

    def run_trial(self, policy: PausePolicy, data: dict) -> tuple[Trial | None, str]:
        try:
            return try_policies(trial_specs(policy, data["whole_domain"]), data["text"]), ""
        except PolicyConfigError as exc:
            return None, str(exc)

    def run_calibration(self, policy: PausePolicy, data: dict) -> tuple[Calibration | None, str]:
        specs = trial_specs(policy, data["whole_domain"])
        try:
            return calibrate(specs, policy.domain, data["sessions"]), ""
        except PolicyConfigError as exc:
            return None, str(exc)


def trial_specs(policy: PausePolicy, whole_domain: bool) -> list[dict]:
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


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records written by services; the admin shows them and may delete, never edits."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # the audit chain hashes session ids: deleting a session would break it


class PauseEventInline(admin.TabularInline):
    model = PauseEvent
    fields = ["position", "trigger", "kind", "reason", "latency_ms", "outcome", "halted_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None) -> bool:
        return False


class EditInline(admin.TabularInline):
    model = Edit
    fields = ["kind", "start", "end", "text_before", "text_after", "author", "applied", "error"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ReviewSession)
class ReviewSessionAdmin(ReadOnlyAdmin):
    list_display = ["id", "owner", "domain", "status", "created_at", "updated_at"]
    list_filter = ["status", "domain"]
    search_fields = ["owner__username", "input_text", "text"]
    date_hierarchy = "created_at"
    inlines = [PauseEventInline, EditInline]


@admin.register(PauseEvent)
class PauseEventAdmin(ReadOnlyAdmin):
    list_display = ["session", "position", "trigger", "kind", "latency_ms", "outcome", "halted_at"]
    list_filter = ["kind", "outcome"]


@admin.register(Edit)
class EditAdmin(ReadOnlyAdmin):
    list_display = ["session", "kind", "start", "end", "author", "applied", "created_at"]
    list_filter = ["kind", "applied"]


@admin.register(AuditRecord)
class AuditRecordAdmin(ReadOnlyAdmin):
    """The hash chain is append-only: deleting a record would break verification."""

    list_display = ["id", "session", "actor", "action", "created_at", "hash"]
    list_filter = ["action"]
    search_fields = ["actor", "action", "hash"]

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Only a digest is stored: a new key is shown once, in a message, when created or rotated."""

    list_display = ["user", "created_at"]
    fields = ["user"]
    actions = ["rotate"]
    search_fields = ["user__username"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def save_model(self, request, obj, form, change) -> None:
        key = auth.issue_token(obj.user)
        obj.pk = ApiToken.objects.get(user=obj.user).pk
        self.show_key(request, obj.user, key)

    @admin.action(description="Rotate the selected tokens (shows the new keys)")
    def rotate(self, request, queryset) -> None:
        for token in queryset.select_related("user"):
            self.show_key(request, token.user, auth.issue_token(token.user))

    def show_key(self, request, user, key: str) -> None:
        message = f"API token for {user}: {key} (copy it now; it is not shown again)"
        self.message_user(request, message, messages.WARNING)
