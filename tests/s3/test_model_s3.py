"""The random-operation model tests and the services scenario on a local S3 server, judged
by our reader, hudi-rs (reading over S3 with the same storage options) and the model."""

from __future__ import annotations

import pytest

from tests.core.test_services_scenario import services_scenario
from tests.core.test_write_model import LAYOUTS, judge, run_scenario

# COW and MOR, partitioned and not, bloom / simple / bucket indexes, log blocks in both formats
S3_LAYOUTS = [layout for layout in LAYOUTS if layout.name in (
    "nonpartitioned", "cow_bucket", "mor_bloom", "mor_complex_avro")]


@pytest.mark.parametrize("layout", S3_LAYOUTS, ids=lambda layout: layout.name)
def test_three_judges_agree_on_s3(layout, s3_table, s3_options):
    table, model = run_scenario(layout, s3_table, seed=3, storage_options=s3_options)
    assert table.storage.fs.type_name == "s3" and table.storage.atomic_create
    judge(layout, table, model, s3_table, s3_options)


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_services_scenario_on_s3(s3_table, s3_options, table_type):
    services_scenario(s3_table, table_type, s3_options)
