"""Redact the commands recorded before redaction existed (DESIGN.md §8).

Each ArchiveResult's ``cmd`` and each ``history[i]["cmd"]`` goes through
core/extractors/redaction.py's ``redact_command``, which is idempotent: a command recorded
since passes unchanged. Forward only: what was hidden cannot come back.
"""

from __future__ import annotations

from django.db import migrations

BATCH = 500  # rows read at once


def redact_recorded_commands(apps, schema_editor) -> None:
    """Rewrite every recorded command that still holds a credential; leave the others."""
    from core.extractors.redaction import redact_command

    results = apps.get_model("core", "ArchiveResult").objects.using(schema_editor.connection.alias)
    changed = []  # written once the read is over, not under an open cursor
    for pk, cmd, history in results.values_list("pk", "cmd", "history").iterator(BATCH):
        new_cmd = redact_command(cmd) if isinstance(cmd, list) else cmd
        new_history = [_redacted_run(run, redact_command) for run in history or []]
        if new_cmd != cmd or new_history != (history or []):
            changed.append((pk, new_cmd, new_history))
    for pk, cmd, history in changed:
        results.filter(pk=pk).update(cmd=cmd, history=history)


def _redacted_run(run, redact_command):
    """One ``history`` entry with its ``cmd`` redacted (anything else is kept as it is)."""
    if isinstance(run, dict) and isinstance(run.get("cmd"), list):
        return {**run, "cmd": redact_command(run["cmd"])}
    return run


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0008_archiveresult_refused"),
    ]

    operations = [
        migrations.RunPython(redact_recorded_commands, migrations.RunPython.noop),
    ]
