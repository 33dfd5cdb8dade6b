"""What an admin configures: domains, their glossaries, policies and presets."""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import translation
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _


def in_page_language(name: str, name_zh: str) -> str:
    """The Chinese display name on a Chinese page where an admin gave one, else the name."""
    chinese = (translation.get_language() or "").startswith("zh")
    return name_zh if chinese and name_zh else name


AFTER_REVIEW, DELAYED = "after_review", "delayed"
FULL, GATED = "full", "gated"

# The task types a domain's presets and the classifier name (reviewer.lifecycle.task_types).
TASK_TYPES = [
    ("deterministic", pgettext_lazy("task type", "deterministic")),
    ("open", pgettext_lazy("task type", "open")),
    ("reasoning", pgettext_lazy("task type", "reasoning")),
]

# The policy kinds (inference.policies) as a policy's or a pause's name in the admin says them:
# the engine's own word in English. A kind not listed shows as it is stored.
POLICY_KIND_WORDS = {
    "keyword": pgettext_lazy("policy kind", "keyword"),
    "regex": pgettext_lazy("policy kind", "regex"),
    "low_confidence": pgettext_lazy("policy kind", "low_confidence"),
    "high_entropy": pgettext_lazy("policy kind", "high_entropy"),
    "overconfidence": pgettext_lazy("policy kind", "overconfidence"),
    "sentence_count": pgettext_lazy("policy kind", "sentence_count"),
    "tool_call": pgettext_lazy("policy kind", "tool_call"),
    "drift": pgettext_lazy("policy kind", "drift"),
    "learned": pgettext_lazy("policy kind", "learned"),
}


def policy_kind_word(kind: str) -> str:
    return str(POLICY_KIND_WORDS.get(kind, kind))


def word_list(text: str) -> list[str]:
    """Words separated by commas (either width) or new lines."""
    return [word.strip() for word in re.split(r"[,，、\n]", text) if word.strip()]


class Domain(models.Model):
    """A field of review (clinical notes, contracts, ...) with its prompt and decoding defaults."""

    name = models.CharField(_("name"), max_length=100, unique=True)
    name_zh = models.CharField(
        _("Chinese name"), max_length=100, blank=True, help_text=_("Shown on Chinese pages")
    )
    slug = models.SlugField(_("slug"), max_length=100, unique=True)
    specialty = models.CharField(
        _("specialty"), max_length=50, help_text=_("medical, legal, insurance, patent, ...")
    )
    system_prompt = models.TextField(_("system prompt"))
    decoding = models.JSONField(
        _("decoding"), default=dict, blank=True, help_text=_("Default sampling parameters")
    )
    max_pauses_per_100_tokens = models.PositiveSmallIntegerField(
        _("pauses per 100 tokens"),
        default=3,
        validators=[MaxValueValidator(100)],
        help_text=_(
            "At most this many policy pauses in any 100 generated tokens; the policies'"
            " other pauses are kept as flags. 0: no limit. Reviewers' own pauses do not count."
        ),
    )
    min_pause_distance = models.PositiveSmallIntegerField(
        _("minimum tokens between pauses"),
        default=20,
        validators=[MaxValueValidator(10000)],
        help_text=_(
            "A policy may pause only this many generated tokens after the last pause"
            " (a reviewer's included). 0: no minimum."
        ),
    )
    resume_time_after_s = models.PositiveIntegerField(
        _("tell the time after a pause of (seconds)"),
        default=600,
        validators=[MaxValueValidator(7 * 24 * 3600)],
        help_text=_(
            "Resuming after a longer pause tells the model the current time (a note in"
            " its context, not in the text). 0: never."
        ),
    )

    # Review on a floor: who reviews this domain, and what an application's call receives.
    reviewers = models.ManyToManyField(
        "auth.User",
        blank=True,
        related_name="review_domains",
        verbose_name=_("reviewers"),
        help_text=_("Reviewers of this domain: its gateway generations appear in their queue"),
    )
    delivery_mode = models.CharField(
        _("delivery mode"),
        max_length=12,
        choices=[
            (AFTER_REVIEW, _("after review: nothing leaves before a reviewer approves")),
            (DELAYED, _("delayed: text streams a few sentences behind the model")),
        ],
        default=AFTER_REVIEW,
        help_text=_("What an application calling the gateway receives"),
    )
    delay_sentences = models.PositiveSmallIntegerField(
        _("delay sentences"),
        default=1,
        validators=[MaxValueValidator(3)],
        help_text=_("Delayed delivery: how many sentences the application stays behind (0-3)"),
    )
    auto_approve_unpaused = models.BooleanField(
        _("auto approve unpaused"),
        default=False,
        help_text=_("A gateway generation no policy paused is approved by the system (audited)"),
    )
    max_wait_s = models.PositiveIntegerField(
        _("longest wait of a call (seconds)"),
        default=600,
        validators=[MinValueValidator(1), MaxValueValidator(24 * 3600)],
        help_text=_(
            "A gateway call that waits longer for review gets an error naming the"
            " generation, which stays reachable at /v1/responses/{id}"
        ),
    )
    claim_minutes = models.PositiveSmallIntegerField(
        _("claim minutes"),
        default=10,
        validators=[MinValueValidator(1), MaxValueValidator(24 * 60)],
        help_text=_("A claim expires after this many minutes without the reviewer's activity"),
    )
    review_sla_minutes = models.PositiveIntegerField(
        _("review SLA (minutes)"),
        default=15,
        validators=[MinValueValidator(1), MaxValueValidator(7 * 24 * 60)],
        help_text=_("A waiting item older than this stands out in the queue and in /metrics"),
    )

    # Attention gating (inference/gating.py): which history positions a decode step looks at.
    attention = models.CharField(
        _("attention"),
        max_length=5,
        choices=[
            (FULL, _("full: every position, every step")),
            (GATED, _("gated: sinks, a recent window, heavy hitters and the anchors")),
        ],
        default=FULL,
        help_text=_("Gated attention looks at fewer positions per step: faster at long context"),
    )
    gate_sinks = models.PositiveSmallIntegerField(
        _("sinks"),
        default=4,
        validators=[MaxValueValidator(64)],
        help_text=_("First positions kept"),
    )
    gate_window = models.PositiveSmallIntegerField(
        _("recent window"),
        default=64,
        validators=[MinValueValidator(1), MaxValueValidator(4096)],
        help_text=_("Latest positions kept"),
    )
    gate_top_k = models.PositiveSmallIntegerField(
        _("heavy hitters"),
        default=10,
        validators=[MaxValueValidator(4096)],
        help_text=_("Positions kept because the model paid them the most attention"),
    )
    gate_wide_top_k = models.PositiveSmallIntegerField(
        _("heavy hitters after a recall word"),
        default=50,
        validators=[MaxValueValidator(4096)],
        help_text=_("The gate widens to this many when the recent text names the history"),
    )
    recall_words_en = models.CharField(
        _("recall words (English)"),
        max_length=500,
        blank=True,
        default="history, previously, prior",
        help_text=_("Comma-separated; any of them in the recent text widens the gate"),
    )
    recall_words_zh = models.CharField(
        _("recall words (Chinese)"),
        max_length=500,
        blank=True,
        default="病史, 既往, 上次",
        help_text=_("Comma-separated (，or 、 too)"),
    )

    class Meta:
        ordering = ["name"]
        verbose_name = _("domain")
        verbose_name_plural = _("domains")

    def __str__(self) -> str:
        return self.name

    def gate(self) -> dict[str, Any]:
        """The engine's GateConfig as JSON: a session started here carries it in its params."""
        return {
            "mode": self.attention,
            "sinks": self.gate_sinks,
            "window": self.gate_window,
            "top_k": self.gate_top_k,
            "wide_top_k": self.gate_wide_top_k,
            "triggers": word_list(self.recall_words_en) + word_list(self.recall_words_zh),
        }

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        from inference.config import SamplingConfigError, SamplingParams
        from inference.gating import GateConfig, GateConfigError
        from reviewer.web.ui_text import error_text

        # Every session started here begins from these: a list, an unknown name or a value
        # out of range would refuse (or break) every one of them, so it is refused here.
        if not isinstance(self.decoding, dict):
            raise ValidationError(
                {"decoding": _('A JSON object of sampling parameters, e.g. {"temperature": 0.7}')}
            )
        try:
            SamplingParams.from_dict(self.decoding)
        except (SamplingConfigError, TypeError) as exc:
            raise ValidationError({"decoding": error_text(exc)}) from exc
        try:
            GateConfig.from_dict(self.gate())
        except GateConfigError as exc:
            # Shown next to the field the message names (attention.top_k: gate_top_k).
            named = str(exc).split(" ")[0].removeprefix("attention.")
            field = f"gate_{named}" if named in ("sinks", "window", "top_k", "wide_top_k") else ""
            raise ValidationError({field or NON_FIELD_ERRORS: error_text(exc)}) from exc

    @property
    def display_name(self) -> str:
        return in_page_language(self.name, self.name_zh)

    def pause_budget(self) -> dict[str, Any]:
        """The engine's PauseBudget as JSON: a session stores the one it started with."""
        return {
            "per_100_tokens": self.max_pauses_per_100_tokens,
            "min_distance": self.min_pause_distance,
            "hold_until_first_word": True,
        }


class Glossary(models.Model):
    domain = models.ForeignKey(
        Domain, on_delete=models.CASCADE, related_name="glossaries", verbose_name=_("domain")
    )
    name = models.CharField(_("name"), max_length=100)

    class Meta:
        unique_together = [("domain", "name")]
        verbose_name = _("glossary")
        verbose_name_plural = _("glossaries")

    def __str__(self) -> str:
        return f"{self.domain}: {self.name}"


class GlossaryTerm(models.Model):
    glossary = models.ForeignKey(
        Glossary, on_delete=models.CASCADE, related_name="terms", verbose_name=_("glossary")
    )
    term = models.CharField(_("term"), max_length=200)
    preferred = models.CharField(
        _("preferred"), max_length=300, help_text=_("Preferred replacement")
    )
    code = models.CharField(
        _("code"), max_length=50, blank=True, help_text=_("ICD-10, IPC or clause code")
    )
    note = models.TextField(_("note"), blank=True)

    class Meta:
        ordering = ["term"]
        unique_together = [("glossary", "term")]
        verbose_name = _("glossary term")
        verbose_name_plural = _("glossary terms")

    def __str__(self) -> str:
        return f"{self.term} → {self.preferred}"


class PausePolicy(models.Model):
    """An admin-configured reason to stop generation; parameters are validated by the engine."""

    ACTIONS = [("pause", _("pause")), ("rollback", _("rollback")), ("flag", _("flag"))]

    domain = models.ForeignKey(
        Domain, on_delete=models.CASCADE, related_name="policies", verbose_name=_("domain")
    )
    name = models.CharField(_("name"), max_length=100)
    name_zh = models.CharField(
        _("Chinese name"), max_length=100, blank=True, help_text=_("Shown on Chinese pages")
    )
    kind = models.CharField(_("kind"), max_length=30)
    params = models.JSONField(default=dict, blank=True)
    action = models.CharField(_("action"), max_length=10, choices=ACTIONS, default="pause")
    enabled = models.BooleanField(_("enabled"), default=True)
    cooldown = models.PositiveIntegerField(
        _("cooldown"), default=0, help_text=_("Tokens before it may fire again")
    )
    order = models.PositiveIntegerField(_("order"), default=0)
    priority = models.IntegerField(
        _("priority"),
        default=0,
        validators=[MinValueValidator(-1000), MaxValueValidator(1000)],
        help_text=_(
            "When several policies want to pause at the same token, the highest priority"
            " pauses and the others are kept as flags."
        ),
    )
    may_pause_before_first_word = models.BooleanField(
        _("may pause before first word"),
        default=False,
        help_text=_(
            "Allow a pause before the model has written its first word (otherwise such"
            " a pause is kept as a flag)."
        ),
    )

    class Meta:
        ordering = ["domain", "order", "id"]
        unique_together = [("domain", "name")]
        verbose_name = _("pause policy")
        verbose_name_plural = _("pause policies")

    def __str__(self) -> str:
        return f"{self.domain}: {self.name} ({policy_kind_word(self.kind)})"

    @property
    def display_name(self) -> str:
        return in_page_language(self.name, self.name_zh)

    def to_spec(self) -> dict[str, Any]:
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
        from reviewer.web.ui_text import error_text

        try:
            build_policy(self.to_spec())
        except PolicyConfigError as exc:
            raise ValidationError(error_text(exc)) from exc


class RoiSettings(models.Model):
    """What an admin assumes when Pause ROI is computed for a domain; shown beside every figure."""

    domain = models.OneToOneField(
        Domain, on_delete=models.CASCADE, related_name="roi_settings", verbose_name=_("domain")
    )
    baseline_regenerate_cycles = models.FloatField(
        _("baseline regenerate cycles"),
        default=1.0,
        help_text=_("Generate → review → regenerate cycles one generation needed before pausing"),
    )
    minutes_saved_per_cycle = models.FloatField(
        _("minutes saved per cycle"),
        default=10.0,
        help_text=_("Reviewer minutes one avoided regenerate cycle saves"),
    )
    reviewer_hourly_cost = models.DecimalField(
        _("reviewer hourly cost"), max_digits=10, decimal_places=2, default=100
    )
    loss_avoided_per_interception = models.DecimalField(
        _("loss avoided per interception"),
        max_digits=12,
        decimal_places=2,
        default=0,
        help_text=_("Cost of an error a policy caught"),
    )
    annual_system_cost = models.DecimalField(
        _("annual system cost"), max_digits=12, decimal_places=2, default=0
    )
    currency = models.CharField(_("currency"), max_length=3, default="USD")
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("ROI settings")
        verbose_name_plural = _("ROI settings")

    def __str__(self) -> str:
        return gettext("ROI settings of %(domain)s") % {"domain": self.domain}

    def clean(self) -> None:
        """No figure is negative (a negative cost turns every ROI around), and the currency is
        a three-letter code (USD, CNY, EUR)."""
        from django.core.exceptions import ValidationError

        numbers = ["baseline_regenerate_cycles", "minutes_saved_per_cycle", "reviewer_hourly_cost"]
        numbers += ["loss_avoided_per_interception", "annual_system_cost"]
        errors = {
            name: _("Must be 0 or more")
            for name in numbers
            if getattr(self, name) is not None and getattr(self, name) < 0
        }
        if not (len(self.currency) == 3 and self.currency.isascii() and self.currency.isalpha()):
            errors["currency"] = _("A three-letter currency code, such as USD, CNY or EUR")
        if errors:
            raise ValidationError(errors)


class TaskDecoding(models.Model):
    """A domain's decoding parameters for one task type, over the built-in preset."""

    TASK_TYPES = TASK_TYPES

    domain = models.ForeignKey(
        Domain, on_delete=models.CASCADE, related_name="task_decodings", verbose_name=_("domain")
    )
    task_type = models.CharField(_("task type"), max_length=20, choices=TASK_TYPES)
    params = models.JSONField(
        _("params"),
        default=dict,
        blank=True,
        help_text=_('Sampling parameters, e.g. {"temperature": 0.2}'),
    )

    class Meta:
        ordering = ["domain", "task_type"]
        unique_together = [("domain", "task_type")]
        verbose_name = _("task decoding preset")
        verbose_name_plural = _("task decoding presets")

    def __str__(self) -> str:
        return f"{self.domain}: {self.get_task_type_display()}"

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        from inference.config import SamplingConfigError, SamplingParams
        from reviewer.web.ui_text import error_text

        try:
            SamplingParams.for_task(self.task_type, **(self.params or {}))
        except (SamplingConfigError, TypeError) as exc:
            raise ValidationError(error_text(exc)) from exc


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
