"""A job's uploaded conversation file, kept beside the job as its prompt sample is."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0011_quant_variants"),
    ]

    operations = [
        migrations.CreateModel(
            name="ConversationFile",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("filename", models.CharField(blank=True, max_length=255)),
                ("text", models.TextField()),
                ("conversation_count", models.PositiveIntegerField()),
                ("size_bytes", models.PositiveIntegerField()),
                ("sha256", models.CharField(max_length=64)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "job",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="conversation_file",
                        to="jobs.job",
                    ),
                ),
            ],
        ),
    ]
