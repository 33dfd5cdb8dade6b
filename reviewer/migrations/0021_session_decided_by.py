from django.db import migrations, models
from django.db.models import OuterRef, Subquery, Value
from django.db.models.functions import Coalesce

DECISIONS = ("approve", "reject")
SYSTEM_ACTOR = "system"  # reviewer.lifecycle.gateway's, as stored


def from_the_chain(apps, schema_editor):
    """Each decided session's decider, from its decision's audit record."""
    sessions = apps.get_model("reviewer", "ReviewSession")
    records = apps.get_model("reviewer", "AuditRecord")
    decider = (
        records.objects.filter(session=OuterRef("pk"), action__in=DECISIONS)
        .exclude(actor=SYSTEM_ACTOR)
        .order_by("-id")
        .values("actor")[:1]
    )
    sessions.objects.filter(status__in=("completed", "rejected")).update(
        decided_by=Coalesce(Subquery(decider), Value(""))
    )


class Migration(migrations.Migration):
    dependencies = [
        ("reviewer", "0020_session_task_classifier_version"),
    ]

    operations = [
        migrations.AddField(
            model_name="reviewsession",
            name="decided_by",
            field=models.CharField(
                blank=True,
                help_text="The reviewer who approved or rejected it; empty for the system's approval",
                max_length=150,
                verbose_name="decided by",
            ),
        ),
        migrations.RunPython(from_the_chain, migrations.RunPython.noop),
    ]
