"""Paths read from an S3 table's plans, metadata and markers stay inside the table: another
bucket, `..` out of the table's prefix or another scheme is refused before anything is
deleted, naming the table, the instant and the path (the local forms: tests/core)."""

from __future__ import annotations

import uuid

import pytest

from airflow_lake.core.storage import open_storage
from tests.core.test_path_escapes import ATTACKS, TABLE_TYPE, VICTIM, check_refused, new_table
from tests.s3.server import create_bucket


@pytest.mark.parametrize("form", ["other-bucket", "s3a-other-bucket", "dotdot", "relative", "no-scheme"])
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_plan_naming_an_object_outside_the_table_is_refused(s3_endpoint, s3_bucket, s3_options, attack, form):
    other = f"victim-{uuid.uuid4().hex[:12]}"
    create_bucket(s3_endpoint, other)
    victims = {"other-bucket": (f"s3://{other}/data", f"s3://{other}/data"),
               "s3a-other-bucket": (f"s3://{other}/data", f"s3a://{other}/data"),
               "dotdot": (f"s3://{s3_bucket}/lake/victim", f"s3://{s3_bucket}/lake/table/../victim"),
               "relative": (f"s3://{s3_bucket}/lake/victim", "../victim"),
               "no-scheme": (f"s3://{s3_bucket}/lake/victim", f"/{s3_bucket}/lake/victim")}
    folder, named = victims[form]
    store = open_storage(folder, s3_options)
    store.write(VICTIM, b"precious")
    table = new_table(f"s3://{s3_bucket}/lake/table", TABLE_TYPE.get(attack, "COPY_ON_WRITE"), s3_options)
    check_refused(table, attack, f"{named}/{VICTIM}", {
        "the victim survives": lambda: store.read(VICTIM) == b"precious",
        "nothing new next to the victim": lambda: [f.path for f in store.list("", recursive=True)] == [VICTIM]})
