"""What a command's arguments mean for this installation: the domain named, the sampling
parameters asked for, whether an input or an edit still fits the model's context."""

from __future__ import annotations

import random
from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _

from inference.config import SamplingConfigError, SamplingParams
from reviewer.lifecycle import gate, task_types
from reviewer.models import Domain, GlossaryTerm, ReviewSession
from reviewer.web import arguments
from reviewer.web.arguments import InvalidInput
from reviewer.web.ui_text import error_text


def domain_named(name: Any) -> Domain:
    if name is None:
        raise InvalidInput(_("domain is required"))
    name = arguments.DOMAIN(name)
    domain = Domain.objects.filter(name=name).first() or Domain.objects.filter(slug=name).first()
    if domain is None:
        known = ", ".join(Domain.objects.values_list("name", flat=True))
        raise InvalidInput(
            _("Unknown domain %(name)r; known domains: %(known)s") % {"name": name, "known": known}
        )
    return domain


def clean_input(text: Any) -> str:
    if text is None:
        raise InvalidInput(_("input is required"))
    return gate.check_markup(arguments.INPUT(text))


def task_type(text: str, override: Any) -> tuple[str, str, int | None]:
    """(task type, source, classifier version): see task_types.label."""
    if override not in (None, ""):
        override = arguments.TASK_TYPE(override)
    try:
        return task_types.label(gate.case_text(text)[0], override)  # the words, not the markup
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


def sampling_params(
    domain: Domain,
    seed: Any,
    max_new_tokens: Any,
    decoding: Any,
    preset: dict[str, Any] | None = None,
) -> SamplingParams:
    """The domain's defaults, then the task type's preset, then what the request asked for;
    the attention gate is the request's, else the domain's."""
    if decoding is not None and not isinstance(decoding, dict):
        raise InvalidInput(_("decoding must be an object"))
    values = {**domain.decoding, **(preset or {}), **(decoding or {})}
    values["attention"] = gate.session_gate(domain, (decoding or {}).get("attention"))
    if seed is None:  # a seed given in decoding counts as one given beside it
        seed = (decoding or {}).get("seed")
    values["seed"] = arguments.SEED(seed) if seed is not None else random.randrange(2**31)
    limit = max_new_tokens if max_new_tokens is not None else values.get("max_new_tokens")
    values["max_new_tokens"] = (
        arguments.MAX_NEW_TOKENS(limit) if limit is not None else settings.CAESURA_MAX_NEW_TOKENS
    )
    try:
        return SamplingParams.from_dict(values)
    except (SamplingConfigError, TypeError) as exc:
        raise InvalidInput(
            _("Bad decoding parameters: %(error)s") % {"error": error_text(exc)}
        ) from None


def check_context_fits(domain: Domain, text: str, max_new_tokens: int) -> None:
    from reviewer.web.tokenizer import context_length, prompt_length  # loads a tokenizer: lazily

    needed = prompt_length(domain.system_prompt, text) + max_new_tokens
    limit = context_length()
    if needed > limit:
        raise InvalidInput(
            _(
                "Input too long: prompt plus max_new_tokens is %(needed)s tokens, the model's"
                " context is %(limit)s"
            )
            % {"needed": needed, "limit": limit}
        )


def check_edit_fits(session: ReviewSession, edited_text: str) -> None:
    """The edited text is prefilled after the prompt, and generation continues up to
    max_new_tokens in all: both must still fit the model's context."""
    from reviewer.web.tokenizer import context_length, prompt_length, text_length

    prompt = len(session.prompt_ids) or prompt_length(
        session.domain.system_prompt, session.input_text
    )
    generated = text_length(edited_text)
    to_come = max(session.max_new_tokens - generated, 0)
    needed, limit = prompt + generated + to_come, context_length()
    if needed > limit:
        raise InvalidInput(
            _(
                "Edit too long: prompt (%(prompt)s tokens) plus the edited text (%(generated)s)"
                " and the rest of max_new_tokens (%(to_come)s) is %(needed)s tokens, the model's"
                " context is %(limit)s"
            )
            % {
                "prompt": prompt,
                "generated": generated,
                "to_come": to_come,
                "needed": needed,
                "limit": limit,
            }
        )


def glossary_term(session: ReviewSession, term_id: Any) -> GlossaryTerm | None:
    if term_id is None:
        return None
    term = GlossaryTerm.objects.filter(
        pk=arguments.GLOSSARY_TERM(term_id), glossary__domain=session.domain
    ).first()
    if term is None:
        raise InvalidInput(
            _("Glossary term %(term)s is not in the %(domain)s glossary")
            % {"term": term_id, "domain": session.domain}
        )
    return term
