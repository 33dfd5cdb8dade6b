"""What Caesura keeps in Postgres, by noun; the session's statuses and transitions are ``statuses``."""

from reviewer.models.application import Application
from reviewer.models.audit import ApiToken, AuditGraph, AuditRecord
from reviewer.models.domain import (
    Domain,
    Glossary,
    GlossaryTerm,
    PauseModelVersion,
    PausePolicy,
    RoiSettings,
    TaskDecoding,
    in_page_language,
)
from reviewer.models.session import (
    CommandReceipt,
    Edit,
    PauseEvent,
    ReviewSession,
    SessionEvent,
    SessionQuerySet,
)
from reviewer.models.task_classifier import TaskClassifierVersion, TaskCorrection

__all__ = [
    "ApiToken",
    "Application",
    "AuditGraph",
    "AuditRecord",
    "CommandReceipt",
    "Domain",
    "Edit",
    "Glossary",
    "GlossaryTerm",
    "PauseEvent",
    "PauseModelVersion",
    "PausePolicy",
    "ReviewSession",
    "RoiSettings",
    "SessionEvent",
    "SessionQuerySet",
    "TaskClassifierVersion",
    "TaskCorrection",
    "TaskDecoding",
    "in_page_language",
]
