"""Stored jobs survive the move of their options from columns to one JSON value."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("jobs", "0007_spec_ks_blank_is_the_plans")]
AFTER = [("jobs", "0008_options_as_one_json_value")]

pytestmark = pytest.mark.postgres  # data migrations: JSON columns differ by database


def migrate_to(target):
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    executor.loader.build_graph()
    return executor.loader.project_state(target).apps


@pytest.mark.django_db(transaction=True)
def test_columns_become_json_and_back():
    old = migrate_to(BEFORE).get_model("jobs", "Job")
    old.objects.create(
        model_name="demo", prompt_tokens=300, concurrency=4, spec_ks="4, 1,2",
        precisions="fp32,int8", quant_keep="", run_speculative=True, ttft_ms=250.0,
        tp_measure=None,
    )  # fmt: skip
    try:
        new = migrate_to(AFTER).get_model("jobs", "Job")
        options = new.objects.get().options
        assert options["spec_ks"] == [1, 2, 4]
        assert (options["precisions"], options["quant_keep"]) == (["fp32", "int8"], [])
        assert (options["prompt_tokens"], options["concurrency"]) == (300, 4)
        assert (options["run_speculative"], options["run_caching"]) == (True, False)
        targets = (options["ttft_ms"], options["tpot_ms"], options["tp_measure"])
        assert targets == (250.0, None, None)

        back = migrate_to(BEFORE).get_model("jobs", "Job").objects.get()
        assert (back.spec_ks, back.precisions, back.prompt_tokens) == ("1,2,4", "fp32,int8", 300)
    finally:
        migrate_to(MigrationExecutor(connection).loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_kept_parts_become_variants_and_back():
    old = migrate_to([("jobs", "0010_worker_engines")]).get_model("jobs", "Job")
    old.objects.create(model_name="demo", options={"quant_keep": ["lm_head"], "concurrency": 2})
    try:
        new = migrate_to([("jobs", "0011_quant_variants")]).get_model("jobs", "Job")
        assert new.objects.get().options == {"quant_variants": ["lm_head"], "concurrency": 2}
        back = migrate_to([("jobs", "0010_worker_engines")]).get_model("jobs", "Job")
        assert back.objects.get().options == {"quant_keep": ["lm_head"], "concurrency": 2}
    finally:
        migrate_to(MigrationExecutor(connection).loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_conversation_files_kept_before_turn_counts_get_theirs():
    from profiling.projection.conversation_workloads import MAX_TURNS
    from tests.advisor.jobs.test_conversation_upload import CHATS
    from tests.profiling.projection.test_conversations import turns_file

    old = migrate_to([("jobs", "0012_conversation_file")])
    jobs, files = (old.get_model("jobs", name).objects for name in ("Job", "ConversationFile"))
    kept = {"chats": CHATS.decode(), "over the cap": turns_file(MAX_TURNS + 1)}
    for name, text in kept.items():
        files.create(job=jobs.create(model_name="demo"), filename=name, text=text,
                     conversation_count=1, size_bytes=1, sha256="0" * 64)  # fmt: skip
    try:
        new = migrate_to([("jobs", "0013_conversation_turn_count")])
        counted = dict(new.get_model("jobs", "ConversationFile").objects.values_list(
            "filename", "turn_count"))  # fmt: skip
        assert counted == {"chats": 3, "over the cap": None}  # the worker refuses that one
    finally:
        migrate_to(MigrationExecutor(connection).loader.graph.leaf_nodes())
