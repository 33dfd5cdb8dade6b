"""Admin forms for pause policies: one form per policy kind, generated from its schema.

The engine owns validation (`build_policy`); these forms only turn its parameter schema
into fields and put its complaints next to the field they name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django import forms
from django.conf import settings
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from inference.policies import POLICY_KINDS, Policy, PolicyConfigError, build_policy
from reviewer.models import PausePolicy
from reviewer.web.ui_text import error_text

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

PARAM_PREFIX = "param_"
VLLM_HAS_NO_HIDDEN_STATES = _(
    "This installation runs the vLLM backend (CAESURA_BACKEND=vllm), which does not expose the "
    "hidden states drift compares with the prompt: the policy could never run there. Use the "
    "transformers backend for drift."
)
SPEC_FIELDS = (
    "name",
    "action",
    "cooldown",
    "enabled",
    "kind",
    "priority",
    "may_pause_before_first_word",
)

KIND_LABELS = {
    "keyword": _("Keyword"),
    "regex": _("Regular expression"),
    "low_confidence": _("Low confidence"),
    "high_entropy": _("High entropy"),
    "overconfidence": _("Overconfidence"),
    "sentence_count": _("Sentence count"),
    "tool_call": _("Tool call"),
    "drift": _("Drift"),
    "learned": _("Learned"),
}

KIND_DESCRIPTIONS = {
    "keyword": _("Pauses when one of the listed words or phrases appears."),
    "regex": _("Pauses when a regular expression matches the generated text."),
    "low_confidence": _("Pauses before a token whose top-1 probability is low."),
    "high_entropy": _("Pauses before a token when the model is uncertain (high entropy)."),
    "overconfidence": _("Pauses when a very confident token follows absolute wording."),
    "sentence_count": _("Pauses after every N complete sentences (。！？ as well as . ! ?)."),
    "tool_call": _("Pauses when the model writes a JSON tool call."),
    "drift": _(
        "Rolls back (or pauses, or flags, as its action says) when the text becomes "
        "uncertain and drifts away from the prompt."
    ),
    "learned": _(
        "Pauses where a model trained on this domain's reviews predicts a reviewer would step in."
    ),
}

PARAM_LABELS = {
    "keywords": _("Keywords"),
    "case_sensitive": _("Case sensitive"),
    "whole_word": _("Whole words only"),
    "pattern": _("Pattern"),
    "flags": _("Flags"),
    "threshold": _("Threshold"),
    "words": _("Absolute words"),
    "window_chars": _("Window (characters)"),
    "every": _("Every N sentences"),
    "max_pauses": _("Maximum pauses"),
    "key": _("JSON key"),
    "window": _("Window (tokens)"),
    "entropy_threshold": _("Entropy threshold"),
    "similarity_threshold": _("Similarity threshold"),
    "confidence_floor": _("Confidence floor"),
    "by_task_type": _("By task type"),
    "model": _("Model file"),
    "checksum": _("Checksum"),
}

# The engine's parameter help, listed so that makemessages puts it in the catalog; the form
# translates the engine's text at run time and shows it unchanged if the engine rewords it.
ENGINE_HELP = (
    gettext_noop("Words or phrases that pause generation"),
    gettext_noop("Match letter case exactly"),
    gettext_noop("Do not match inside longer words (not applied to Chinese)"),
    gettext_noop("Regular expression searched in the generated text"),
    gettext_noop('Any of "i" (ignore case), "m", "s", "x"'),
    gettext_noop("Pause when the top-1 probability is below this"),
    gettext_noop("Pause when the entropy (nats) is above this"),
    gettext_noop("Top-1 probability above which a token counts as confident"),
    gettext_noop("Absolute wording to look for"),
    gettext_noop("How many recent characters to search for absolute wording"),
    gettext_noop("Pause after every this many complete sentences"),
    gettext_noop("Stop pausing after this many pauses (empty: no limit)"),
    gettext_noop("Key a JSON object must have to count"),
    gettext_noop("Number of recent tokens averaged"),
    gettext_noop("Mean entropy (nats) above which the window is uncertain"),
    gettext_noop("Mean cosine similarity to the prompt below which the window drifted"),
    gettext_noop("Roll back to just after the last token more confident than this"),
    gettext_noop("Take the window and both thresholds from the session's task type"),
    gettext_noop("Path of the trained pause model file"),
    gettext_noop("SHA-256 of the model file; any other file is refused"),
    gettext_noop(
        "Pause when the predicted chance of an intervention rises to this "
        "(empty: the threshold chosen at training)"
    ),
)

ACTION_LABELS = {"pause": _("pause"), "rollback": _("roll back"), "flag": _("flag only")}


def kind_label(kind: str) -> str:
    return str(KIND_LABELS.get(kind, kind))


def is_text_kind(kind: str) -> bool:
    """Whether sample text alone can trigger the kind (no model signals needed)."""
    return kind in POLICY_KINDS and POLICY_KINDS[kind].text_only


def param_field_name(param: str) -> str:
    return PARAM_PREFIX + param


class StringListField(forms.CharField):
    """A list of strings edited as one item per line; blank lines are dropped."""

    widget = forms.Textarea(attrs={"rows": 5})

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]  # lines, not text
        text = super().to_python(value) or ""
        return [line.strip() for line in text.splitlines() if line.strip()]

    def prepare_value(self, value: Any) -> Any:
        return "\n".join(value) if isinstance(value, list | tuple) else value


def field_for(name: str, schema: dict[str, Any]) -> forms.Field:
    """A form field for one parameter of a kind's `param_schema()`."""
    kind = schema["type"]
    common: dict[str, Any] = {
        "label": PARAM_LABELS.get(name, name.replace("_", " ").capitalize()),
        "help_text": _(schema["help"]),
        "required": schema["required"] and kind != "boolean",
        "initial": schema.get("default"),
    }
    if kind == "boolean":
        return forms.BooleanField(**common)
    if kind == "string_list":
        common["help_text"] = format_lazy("{} ({})", _(schema["help"]), _("one per line"))
        return StringListField(**common)
    if kind == "string":
        return forms.CharField(strip=False, **common)
    bounds: dict[str, Any] = {"min_value": schema.get("min"), "max_value": schema.get("max")}
    if kind == "integer":
        return forms.IntegerField(**bounds, **common)
    return forms.FloatField(**bounds, **common)


def params_from(cleaned: dict[str, Any], policy_cls: type[Policy]) -> dict[str, Any]:
    """The params object to validate: empty optional fields fall back to the engine's default."""
    params: dict[str, Any] = {}
    for name, schema in policy_cls.param_schema().items():
        value = cleaned.get(param_field_name(name))
        if value in (None, "", []) and schema["type"] != "boolean":
            if schema.get("nullable"):
                params[name] = None
            continue
        params[name] = value
    return params


class PolicyForm(forms.ModelForm[PausePolicy]):
    """Base of the per-kind forms made by `policy_form_for`; `policy_kind` is set there."""

    policy_kind: str = ""

    class Meta:
        model = PausePolicy
        fields = [
            "name",
            "name_zh",
            "domain",
            "action",
            "enabled",
            "cooldown",
            "order",
            "priority",
            "may_pause_before_first_word",
        ]
        labels = {
            "name": _("Name"),
            "name_zh": _("Chinese name"),
            "domain": _("Domain"),
            "action": _("Action"),
            "enabled": _("Enabled"),
            "cooldown": _("Cooldown"),
            "order": _("Order"),
            "priority": _("Priority"),
            "may_pause_before_first_word": _("May pause before the first word"),
        }
        help_texts = {
            "name": _("Reviewers see this name when the policy pauses a session."),
            "name_zh": _("Shown instead of the name on Chinese pages."),
            "action": _("What happens when it fires."),
            "cooldown": _("Tokens before it may fire again"),
            "order": _("Policies are checked in this order; lower first."),
            "priority": _(
                "When several policies want to pause at the same token, the highest priority"
                " pauses and the others are kept as flags."
            ),
            "may_pause_before_first_word": _(
                "Allow a pause before the model has written its first word (otherwise such a"
                " pause is kept as a flag)."
            ),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.instance.kind = self.policy_kind
        if "action" in self.fields:
            cast(forms.ChoiceField, self.fields["action"]).choices = self.action_choices()
            if not self.instance.pk:
                self.fields["action"].initial = self.policy_class.default_action
        if "priority" in self.fields:
            self.fields["priority"].required = False  # empty means the default, 0
        if self.instance.pk:
            self.load_params(self.instance.params or {})

    def clean_priority(self) -> int:
        return self.cleaned_data.get("priority") or 0

    @property
    def policy_class(self) -> type[Policy]:
        return POLICY_KINDS[self.policy_kind]

    def action_choices(self) -> list[tuple[str, StrOrPromise]]:
        # Only the actions this kind supports (rollback is for drift alone).
        return [(action, ACTION_LABELS[action]) for action in self.policy_class.actions]

    def load_params(self, params: dict[str, Any]) -> None:
        for name in self.policy_class.param_schema():
            if name in params:
                self.initial[param_field_name(name)] = params[name]

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        if self.errors or cleaned is None:
            return cleaned  # the engine would only repeat the field errors in other words
        spec = self.spec(cleaned)
        try:
            policy = build_policy(spec)
        except PolicyConfigError as exc:
            self.add_error(self.form_field(exc.field), error_text(exc))
            return cleaned
        self.instance.params = policy.params  # normalized, defaults filled in
        if policy.needs_hidden_states and settings.CAESURA_BACKEND == "vllm":
            self.add_error(None, VLLM_HAS_NO_HIDDEN_STATES)
        return cleaned

    def spec(self, cleaned: dict[str, Any]) -> dict[str, Any]:
        return {
            "name": cleaned.get("name") or "",
            "kind": self.policy_kind,
            "action": cleaned.get("action") or self.policy_class.default_action,
            "cooldown": cleaned.get("cooldown") or 0,
            "enabled": bool(cleaned.get("enabled")),
            "priority": cleaned.get("priority") or 0,
            "may_pause_before_first_word": bool(cleaned.get("may_pause_before_first_word")),
            "params": params_from(cleaned, self.policy_class),
        }

    def form_field(self, engine_field: str | None) -> str | None:
        """The form field an engine error belongs to; None puts it above the form."""
        if engine_field is not None and engine_field in self.policy_class.param_schema():
            return param_field_name(engine_field)
        if engine_field in self.fields and engine_field in SPEC_FIELDS:
            return engine_field
        return None

    def _post_clean(self) -> None:
        # The model's clean() rebuilds the policy; after a refusal it would only repeat the
        # message above the form, so model validation waits until the fields are valid.
        if self.errors:
            return
        super()._post_clean()  # type: ignore[misc]  # django-stubs leaves out this private hook


def policy_form_for(kind: str) -> type[PolicyForm]:
    """The form class for one policy kind, with a field per parameter of its schema."""
    if kind not in POLICY_KINDS:
        raise KeyError(kind)
    fields = {
        param_field_name(name): field_for(name, schema)
        for name, schema in POLICY_KINDS[kind].param_schema().items()
    }
    attrs = {"policy_kind": kind, **fields}
    return type(f"{kind.title().replace('_', '')}PolicyForm", (PolicyForm,), attrs)


def param_field_names(kind: str) -> list[str]:
    return [param_field_name(name) for name in POLICY_KINDS[kind].param_schema()]
