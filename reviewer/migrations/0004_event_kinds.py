"""Stored events take the kinds the protocol now uses: the engine's names for its own events,
and a kind of its own for a reviewer's truncate, which shared ``rolled_back`` with the
engine's drift rollback (only the engine's carries ``removed_from``)."""

from django.db import migrations

RENAMED = [("paused", "pause"), ("flagged", "flag"), ("finished", "finish")]


def forwards(apps, schema_editor):
    events = apps.get_model("reviewer", "SessionEvent").objects
    for old, new in RENAMED:
        events.filter(type=old).update(type=new)
    rolled_back = events.filter(type="rolled_back")
    rolled_back.filter(payload__has_key="removed_from").update(type="rollback")
    rolled_back.update(type="truncated")


def backwards(apps, schema_editor):
    events = apps.get_model("reviewer", "SessionEvent").objects
    for old, new in RENAMED:
        events.filter(type=new).update(type=old)
    events.filter(type__in=["rollback", "truncated"]).update(type="rolled_back")


class Migration(migrations.Migration):
    dependencies = [("reviewer", "0003_roi_settings_and_task_types")]

    operations = [migrations.RunPython(forwards, backwards)]
