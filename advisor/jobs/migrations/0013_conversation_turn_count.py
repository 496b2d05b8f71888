"""A conversation file's turn count, kept for the job page beside its conversation count;
files kept before it are counted once here by the library's parser."""

from django.db import migrations, models


def count_turns(apps, schema_editor) -> None:
    from profiling.projection.conversation_workloads import ConversationError, parse_conversations

    ConversationFile = apps.get_model("jobs", "ConversationFile")
    for row in ConversationFile.objects.only("pk", "text").iterator(chunk_size=16):
        try:
            turns = sum(record.turns for record in parse_conversations(row.text))
        except ConversationError:
            continue  # over the turn cap: left uncounted, and the worker refuses it
        ConversationFile.objects.filter(pk=row.pk).update(turn_count=turns)


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0012_conversation_file"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversationfile",
            name="turn_count",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(count_turns, migrations.RunPython.noop),
    ]
