"""The job's options move from one column each to one validated JSON value.

Lists stored as comma text ("1,2,4", "fp32,int8") become JSON lists, in the
library's types; every other value is copied as it is. The reverse writes the
columns back from the JSON, so the step can be undone.
"""

from django.db import migrations, models

NUMBERS = ("spec_ks",)
NAMES = ("precisions", "quant_keep")
PLAIN = (
    "gpu_count", "prompt_tokens", "output_tokens", "concurrency", "shared_prefix_tokens",
    "ttft_ms", "tpot_ms", "run_speculative", "draft_model", "prompt_lookup",
    "run_quantization", "run_caching", "run_parallel", "tp_measure",
)  # fmt: skip


def _parts(text):
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def columns_to_json(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    for job in Job.objects.all().iterator():
        options = {name: getattr(job, name) for name in PLAIN}
        for name in NUMBERS:
            options[name] = sorted({int(p) for p in _parts(getattr(job, name)) if p.isdigit()})
        for name in NAMES:
            options[name] = _parts(getattr(job, name))
        Job.objects.filter(pk=job.pk).update(options=options)


def json_to_columns(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    for job in Job.objects.all().iterator():
        options = job.options or {}
        values = {name: options[name] for name in PLAIN if name in options}
        for name in (*NUMBERS, *NAMES):
            if name in options:
                values[name] = ",".join(str(v) for v in options[name])
        Job.objects.filter(pk=job.pk).update(**values)


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0007_spec_ks_blank_is_the_plans"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="options",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.RunPython(columns_to_json, json_to_columns),
        *[
            migrations.RemoveField(model_name="job", name=name)
            for name in (*PLAIN, *NUMBERS, *NAMES)
        ],
    ]
