"""The admin of domains and their glossaries (import and export as CSV)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils.functional import lazy
from django.utils.html import escape, format_html
from django.utils.text import slugify
from django.utils.translation import gettext_lazy as _

from inference.backend import GATED_ATTENTION
from reviewer.admin.audited import AuditedChanges, values
from reviewer.documents.glossary_csv import GlossaryImportError, export_csv, import_csv
from reviewer.lifecycle import audit, claims
from reviewer.models import (
    Domain,
    Glossary,
    GlossaryTerm,
    PausePolicy,
    RoiSettings,
)
from reviewer.models.domain import GATED
from reviewer.web.features import backend_features

escaped = lazy(escape, str)  # in the page's language, as text


def gate_unavailable() -> str:
    return str(
        _(
            "This domain is set to gated attention, which the %(backend)s backend does not"
            " offer: its sessions will be refused until attention is set to full or the"
            " transformers backend runs."
        )
        % {"backend": settings.CAESURA_BACKEND}
    )


# What an application's call receives from the domain: a change is audited with before/after.
DELIVERY = ["delivery_mode", "delay_sentences", "auto_approve_unpaused", "max_wait_s"]
# Where the model looks while it decodes (attention gating): audited the same way.
ATTENTION = ["attention", "gate_sinks", "gate_window", "gate_top_k", "gate_wide_top_k"]
ATTENTION += ["recall_words_en", "recall_words_zh"]


class GlossaryTermRow(forms.ModelForm[GlossaryTerm]):
    """A row per term, sized to fit a laptop's screen (reviewer/admin-glossary.css, a class
    each: the pages allow no inline style): the default boxes (the note's 40 columns by 10
    rows) made the table wider than it, its Delete column out of sight."""

    class Meta:
        model = GlossaryTerm
        fields = "__all__"
        widgets = {
            name: forms.TextInput(attrs={"class": f"glossary-{name}"})
            for name in ("term", "preferred", "code")
        } | {"note": forms.Textarea(attrs={"rows": 2, "class": "glossary-note"})}


class GlossaryTermInline(admin.TabularInline[GlossaryTerm, Glossary]):
    model = GlossaryTerm
    form = GlossaryTermRow
    extra = 1


@admin.register(Domain)
class DomainAdmin(AuditedChanges[Domain]):
    audit_skip = (*DELIVERY, *ATTENTION)  # audited with their own actions, below

    list_display = [
        "name",
        "name_zh",
        "specialty",
        "max_pauses_per_100_tokens",
        "min_pause_distance",
        "delivery_mode",
        "attention",
        "reviewer_count",
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
        (
            _("Review floor and delivery"),
            {
                "fields": ["reviewers", *DELIVERY, "claim_minutes", "review_sla_minutes"],
                "description": _(
                    "An application's generations in this domain wait in its reviewers' queue;"
                    " the delivery mode says what the application receives, and when."
                    " Changes of delivery and of reviewers are audited."
                ),
            },
        ),
        (
            _("Attention"),
            {
                "fields": [*ATTENTION],
                # The admin shows a description as HTML: the markup must read as text.
                "description": escaped(
                    _(
                        "Gated attention: at each step the model looks only at the first positions"
                        " (sinks), the latest ones (window), those it paid the most attention"
                        " (heavy hitters) and the case text's anchors (<ANCHOR:NAME>…</ANCHOR>)."
                        " A recall word in the recent text widens the gate; <RECALL> in a case"
                        " turns it off for that session. Changes are audited."
                    )
                ),
            },
        ),
    ]
    filter_horizontal = ["reviewers"]

    @admin.display(description=_("reviewers"))
    def reviewer_count(self, obj: Domain) -> int:
        return obj.reviewers.count()

    def deleted_fields(self, obj: Domain) -> dict[str, Any]:
        """Every column, delivery and attention included, and who reviewed the domain."""
        reviewers = sorted(obj.reviewers.values_list("username", flat=True))
        return {**super().deleted_fields(obj), "reviewers": reviewers}

    def deleted_with(self, obj: Domain) -> dict[str, Any]:
        return domain_cascade(obj)

    def save_model(self, request: HttpRequest, obj: Domain, form: Any, change: bool) -> None:
        stored = Domain.objects.filter(pk=obj.pk).first() if change else None
        form.reviewers_before = (
            sorted(stored.reviewers.values_list("username", flat=True)) if stored else []
        )
        super().save_model(request, obj, form, change)
        for action, names in (
            ("domain_delivery_changed", DELIVERY),
            ("domain_attention_changed", ATTENTION),
        ):
            if stored is not None and any(name in form.changed_data for name in names):
                audit.append(
                    action,
                    request.user.get_username(),
                    payload={
                        "domain": obj.slug,
                        "before": {name: getattr(stored, name) for name in names},
                        "after": {name: getattr(obj, name) for name in names},
                    },
                )
        if obj.attention == GATED and GATED_ATTENTION not in backend_features():
            self.message_user(request, gate_unavailable(), messages.WARNING)

    def get_fieldsets(self, request: HttpRequest, obj: Domain | None = None) -> Any:
        """The attention section warns where this domain's gate cannot run here."""
        sets = super().get_fieldsets(request, obj)
        if obj is None or obj.attention != GATED or GATED_ATTENTION in backend_features():
            return sets
        *rest, (title, options) = sets
        warning = format_html('<strong class="errornote">{}</strong> ', gate_unavailable())
        return [*rest, (title, {**options, "description": warning + options["description"]})]

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        after = sorted(form.instance.reviewers.values_list("username", flat=True))
        if after != form.reviewers_before:
            audit.append(
                "domain_reviewers_changed",
                request.user.get_username(),
                payload={
                    "domain": form.instance.slug,
                    "before": form.reviewers_before,
                    "after": after,
                },
            )
            # A reviewer taken off holds no claim from now on (claims.holder); their claims
            # are dropped, audited and told to the queues once this change commits, rather
            # than at the next sweep (each session's row is locked in its own transaction).
            transaction.on_commit(claims.expire_lapsed)


def domain_cascade(domain: Domain) -> dict[str, Any]:
    """What a domain's deletion takes with it: its policies (each row), its glossaries (with
    their number of terms), its ROI settings, its task decoding presets, its learned pause
    models (their version and checksum) and the applications it is no longer bound to."""
    roi = RoiSettings.objects.filter(domain=domain).first()
    glossaries = domain.glossaries.order_by("name").values("id", "name")
    return {
        "policies": [
            values(policy, ("domain",))
            for policy in PausePolicy.objects.filter(domain=domain).order_by("order", "id")
        ],
        "glossaries": [
            {"id": row["id"], "name": row["name"], "terms": row["term_count"]}
            for row in glossaries.annotate(term_count=Count("terms"))
        ],
        "roi_settings": values(roi, ("domain",)) if roi is not None else None,
        "task_decodings": [
            values(preset, ("domain",)) for preset in domain.task_decodings.order_by("task_type")
        ],
        "pause_models": list(
            domain.pause_models.order_by("version").values("id", "version", "checksum")
        ),
        "applications": list(domain.applications.order_by("name").values("id", "name")),
    }


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
class GlossaryAdmin(AuditedChanges[Glossary]):
    """Terms are edited inline, or imported and exported as CSV from the glossary's page."""

    list_display = ["name", "domain", "term_count"]
    list_filter = ["domain"]
    inlines = [GlossaryTermInline]
    change_form_template = "admin/reviewer/glossary/change_form.html"

    class Media:
        css = {"all": ["reviewer/admin-glossary.css"]}

    @admin.display(description=_("terms"))
    def term_count(self, obj: Glossary) -> int:
        return obj.terms.count()

    def deleted_with(self, obj: Glossary) -> dict[str, Any]:
        """Its terms, each row as the glossary had it."""
        return {"terms": [values(term, ("glossary",)) for term in obj.terms.order_by("id")]}

    def get_urls(self) -> list[URLPattern]:
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

    def import_file(
        self, request: HttpRequest, glossary: Glossary, form: GlossaryImportForm
    ) -> list[str]:
        """Import the uploaded file; the problems found, or [] after a success message."""
        data = form.cleaned_data["file"].read()
        try:
            result = import_csv(glossary, data, replace=form.cleaned_data["replace"])
        except GlossaryImportError as exc:
            return exc.errors
        audit.append(
            "glossary_imported",
            request.user.get_username(),
            payload={"glossary": glossary.pk, "name": str(glossary), **vars(result)},
        )
        message = _("Imported: %(created)d new, %(updated)d updated, %(deleted)d deleted.")
        self.message_user(request, message % vars(result), messages.SUCCESS)
        return []

    def glossary_or_404(
        self,
        request: HttpRequest,
        object_id: str,
        allowed: Callable[[HttpRequest, Glossary], bool],
    ) -> Glossary:
        glossary = self.get_object(request, object_id)
        if glossary is None:
            raise Http404
        if not allowed(request, glossary):
            raise PermissionDenied
        return glossary
