"""`quant_keep` becomes `quant_variants`: quantized precisions now keep the LM head
and the token embeddings in the reference precision by default.

A job that asked to see a part kept (`lm_head`, `embeddings`) was asking for the
contrast between that part quantized and kept; the default now keeps it, so the
same contrast is the variant with that part quantized, under the same name.
`edge_blocks` still means "kept". The step is a key rename either way.
"""

from django.db import migrations


def _rename(old, new):
    def move(apps, schema_editor):
        Job = apps.get_model("jobs", "Job")
        for job in Job.objects.all().iterator():
            options = dict(job.options or {})
            if old in options:
                options[new] = options.pop(old)
                Job.objects.filter(pk=job.pk).update(options=options)

    return move


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0010_worker_engines"),
    ]

    operations = [
        migrations.RunPython(
            _rename("quant_keep", "quant_variants"), _rename("quant_variants", "quant_keep")
        ),
    ]
