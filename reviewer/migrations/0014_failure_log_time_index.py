"""An index on axes' failure log by time: every failed login prunes the entries older than the
back-off memory (reviewer/web/floor_lockout.py), which without it read the whole log, and the
log grows with every guess at any name. axes does not index the column; the table is its."""

from django.db import migrations

INDEX = "reviewer_axes_failure_time_idx"


class Migration(migrations.Migration):
    dependencies = [
        ("reviewer", "0013_repeated_calls"),
        ("axes", "0010_accessattemptexpiration"),
    ]

    operations = [
        migrations.RunSQL(
            f"CREATE INDEX IF NOT EXISTS {INDEX} ON axes_accessfailurelog (attempt_time)",
            f"DROP INDEX IF EXISTS {INDEX}",
        )
    ]
