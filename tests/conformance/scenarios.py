"""ONE list of write scenarios that every engine must run alike: each operation, both table
types, each index type and key generator, global-index partition moves, soft and hard
deletes, small-file packing and bad inputs. A scenario is a table and its steps; data are
small column dicts (Arrow tables on LocalEngine, DataFrames on SparkEngine)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

COW, MOR = "COPY_ON_WRITE", "MERGE_ON_READ"
INDEXES = ("BLOOM", "SIMPLE", "GLOBAL_BLOOM", "GLOBAL_SIMPLE", "BUCKET")
PARTS = ("a", "b", "c")


@dataclass(frozen=True)
class Step:
    operation: str
    data: dict[str, list[Any]]


@dataclass(frozen=True)
class Scenario:
    name: str
    steps: tuple[Step, ...]
    table_type: str = COW
    options: dict[str, Any] = field(default_factory=dict)
    record_key: str | list[str] = "id"
    partition_fields: str | list[str] | tuple = "part"
    hive_style: bool = False
    precombine: str | None = "ts"


def rows(ids: list[int | str], ts: int | list[int], part: str | list[str] | None = None, **more) -> dict:
    """Columns of rows `k<i>` (a string id is taken as is) in their home partition (`i % 3`)
    unless `part` is given."""
    keys = [i if isinstance(i, str) else f"k{i:02d}" for i in ids]
    out: dict[str, list] = {"id": keys, "ts": ts if isinstance(ts, list) else [ts] * len(keys)}
    if part is None:
        out["part"] = [PARTS[int(k[1:]) % 3] if k[1:].isdigit() else "a" for k in keys]
    else:
        out["part"] = part if isinstance(part, list) else [part] * len(keys)
    out["val"] = [f"{k}@{t}" for k, t in zip(keys, out["ts"], strict=True)]
    out.update(more)
    return out


def _index_steps() -> tuple[Step, ...]:
    return (
        Step("insert", rows(range(12), 1)),
        # updates, a new key per partition, an older value that loses, a key twice in the batch
        Step("upsert", rows([0, 3, 5, "n1", "n2", 6, 6], [2, 2, 0, 2, 2, 3, 2])),
        # soft deletes: a newer one removes its key, an older one loses to the stored record
        Step("upsert", rows([1, 2, 4], [5, 0, 5], _hoodie_is_deleted=[True, True, False])),
        # hard deletes, one of a key that does not exist
        Step("delete", {"id": ["k07", "k08", "zz"], "part": ["b", "c", "a"]}),
        # insert skips the index: a stored key written again is a duplicate (BUCKET: its group's merge)
        Step("insert", rows([9, 20], 9)),
    )


INDEX_SCENARIOS = [
    Scenario(f"{'cow' if tt == COW else 'mor'}_{index.lower()}", _index_steps(), tt,
             {"hoodie.index.type": index, "hoodie.bucket.index.num.buckets": 2})
    for index in INDEXES for tt in (COW, MOR)
]

_OPERATION_STEPS = (
    Step("bulk_insert", rows([0, 1, 2, 3, 3], 1)),  # no combine: k03 twice
    Step("insert", rows([4, 5, 6], 1)),
    Step("upsert", rows([0, 4, 7], 2)),
    Step("insert_overwrite", rows([10, 13], 3, part="b")),  # partition b replaced
    Step("upsert", rows([0, 11], 4)),
    Step("insert_overwrite_table", rows([30, 31], 5)),  # every file group replaced
    Step("delete", {"id": ["k30"], "part": ["a"]}),
)

OPERATION_SCENARIOS = [
    Scenario("cow_operations", _OPERATION_STEPS, COW),
    Scenario("mor_operations", _OPERATION_STEPS, MOR),
    Scenario("insert_drop_duplicates", (
        Step("insert", rows([0, 1, 2], 1)),
        Step("insert", rows([1, 2, 3, 3], [2, 2, 2, 1])),
    ), COW, {"hoodie.datasource.write.insert.drop.duplicates": "true", "hoodie.combine.before.insert": "true"}),
]

KEYGEN_SCENARIOS = [
    Scenario("complex_keygen", (
        Step("insert", {**rows(range(6), 1), "k2": [1, 2, 1, 2, 1, 2], "sub": ["x", "y"] * 3}),
        Step("upsert", {**rows([0, 1, 0], 2), "k2": [1, 1, 2], "sub": ["x", "y", "x"]}),
        Step("delete", {"id": ["k02"], "k2": [1], "part": ["c"], "sub": ["x"]}),
    ), MOR, {"hoodie.index.type": "SIMPLE"}, record_key=["id", "k2"], partition_fields=["part", "sub"],
        hive_style=True),
    Scenario("nonpartitioned_keygen", (
        Step("insert", rows(range(6), 1)),
        Step("upsert", rows([0, 1, "n1"], 2)),
        Step("delete", {"id": ["k02", "zz"], "part": ["a", "a"]}),
    ), COW, partition_fields=()),
    Scenario("timestamp_keygen", (
        Step("insert", {**rows(range(6), 1), "event_ms": [1_680_350_400_000 + (i % 3) * 3_600_000 for i in range(6)]}),
        Step("upsert", {**rows([0, 1], 2), "event_ms": [1_680_350_400_000, 1_680_354_000_000]}),
        Step("delete", {"id": ["k02"], "event_ms": [1_680_357_600_000]}),
    ), MOR, {"hoodie.table.keygenerator.class": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
             "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
             "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd/HH",
             "hoodie.keygen.timebased.timezone": "GMT+8:00"}, partition_fields="event_ms"),
]

_MOVE_STEPS = (
    Step("insert", rows(range(9), 1)),
    # k00 moves a -> b; k01 arrives in c with an older value (loses: stays in b); k02 updated in place
    Step("upsert", rows([0, 1, 2], [2, 0, 2], part=["b", "c", "c"])),
    Step("delete", {"id": ["k03"], "part": ["c"]}),  # a global delete finds k03 in partition a
    Step("upsert", rows([0, 4], 3, part=["c", "a"], _hoodie_is_deleted=[False, True])),
)

MOVE_SCENARIOS = [
    Scenario("cow_global_simple_moves", _MOVE_STEPS, COW, {"hoodie.index.type": "GLOBAL_SIMPLE"}),
    Scenario("mor_global_bloom_moves", _MOVE_STEPS, MOR, {"hoodie.index.type": "GLOBAL_BLOOM"}),
    Scenario("mor_global_simple_moves", _MOVE_STEPS, MOR, {"hoodie.index.type": "GLOBAL_SIMPLE"}),
    Scenario("cow_global_bloom_in_place", _MOVE_STEPS, COW, {"hoodie.index.type": "GLOBAL_BLOOM",
                                                             "hoodie.bloom.index.update.partition.path": "false"}),
]

_SMALL = {"hoodie.parquet.max.file.size": 20_000, "hoodie.parquet.small.file.limit": 15_000,
          "hoodie.copyonwrite.record.size.estimate": 100}
_SMALL_STEPS = (
    Step("insert", rows(range(0, 900, 3), 1, part="a")),  # several file groups in one partition
    Step("insert", rows(range(1, 450, 3), 1, part="a")),  # packed into the small ones first
    Step("upsert", rows(list(range(0, 90, 3)) + list(range(2, 300, 3)), 2, part="a")),
)

SMALL_FILE_SCENARIOS = [
    Scenario("cow_small_file_inserts", _SMALL_STEPS[:2], COW, _SMALL),
    Scenario("mor_small_file_inserts", _SMALL_STEPS[:2], MOR, _SMALL),
    Scenario("cow_small_files", _SMALL_STEPS, COW, _SMALL),
    Scenario("mor_small_files", _SMALL_STEPS, MOR, _SMALL),
]

_BAD_STEPS = (
    Step("insert", rows(range(4), 1)),
    Step("upsert", {**rows([0], 2), "ts": ["2"]}),  # ts retyped: long -> string
    Step("upsert", {"id": ["k00"], "part": ["a"], "val": ["x"]}),  # no ordering field
    Step("merge", rows([0], 2)),  # no such operation
    Step("upsert", rows([0], 2)),  # still writable
)

BAD_INPUT_SCENARIOS = [
    Scenario("cow_bad_inputs", _BAD_STEPS, COW),
    Scenario("mor_bucket_bad_inputs", _BAD_STEPS, MOR, {"hoodie.index.type": "BUCKET"}),
    Scenario("null_key", (
        Step("insert", rows(range(4), 1)),
        Step("upsert", {**rows([0, 1], 2), "id": ["k00", None]}),
        # the error names the row's place in the input, whichever input partition holds it (on
        # Spark also where the rows are cast to the stored types: ts given as int32)
        Step("upsert", {**rows(range(10), 3), "id": [f"k{i:02d}" if i != 7 else None for i in range(10)]}),
        Step("upsert", {**rows(range(10), 3), "ts": pa.array([3] * 10, pa.int32()),
                        "id": [f"k{i:02d}" if i != 8 else "" for i in range(10)]}),
    ), COW),
]

SCENARIOS = (INDEX_SCENARIOS + OPERATION_SCENARIOS + KEYGEN_SCENARIOS + MOVE_SCENARIOS + SMALL_FILE_SCENARIOS
             + BAD_INPUT_SCENARIOS)
