"""The work columns the distributed write adds to the rows (the core's; none reaches a file),
and Spark actions that fail with the core's errors."""

from __future__ import annotations

import pickle
import re
import warnings
from functools import partial

import pyarrow as pa

from airflow_lake.core.errors import LakeError

# the core's work columns, for the Spark stages
from airflow_lake.core.write.execute import DEL, LOC_F, PART, SEQ, TARGET, WORK  # noqa: F401
from airflow_lake.core.write.keying import named_row, row_named
from airflow_lake.core.write.routing import BUCKET, LOC_P, SPREAD, STORED  # noqa: F401

LOOKUP_KEY = "_al_lookup_key"
CANDIDATE = "_al_candidate"  # a file group whose key range holds the key


def stage(action, where: str, what: str, row_of=None):
    """Run a Spark action; an error raised by the core in an executor comes back as that
    error's text, naming the table (not a Java stack trace). `row_of`: a key error names its
    row's sequence number, which `row_of` turns into its place in the input."""
    try:
        return action()
    except LakeError:
        raise
    except Exception as e:  # pyspark wraps executor errors (PythonException, Py4JJavaError)
        text = str(e)
        found = re.findall(r"airflow_lake\.core\.errors\.(\w+): (.+)", text)
        if found:
            name, message = found[-1]
            from airflow_lake.core import errors

            cls = getattr(errors, name, LakeError)
            error = cls(message.strip())
            if row_of is not None and isinstance(error, errors.RecordKeyError) \
                    and (seq := named_row(error)) is not None:
                error = row_named(error, row_of(seq))
            raise error from None
        raise


def scalar_arrow_udf(fn, return_type):
    """`fn` (Arrow arrays in, one array out) as a scalar Arrow UDF: only the columns it is
    given go to Python. (`fn` may be a partial, which has no type hints to infer the kind from.)"""
    from pyspark.sql.functions import ArrowUDFType, arrow_udf

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "It is preferred to specify type hints", UserWarning)
        return arrow_udf(fn, return_type, ArrowUDFType.SCALAR)


def partition_arrow_udf(fn, return_type):
    """`fn` (Arrow arrays in, one array out) given all the rows of a partition at once, as an
    Arrow UDF over the partition's batches (Spark keeps the rows while Python holds the columns
    it is given)."""
    from pyspark.sql.functions import ArrowUDFType, arrow_udf

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "It is preferred to specify type hints", UserWarning)
        return arrow_udf(partial(_whole_partition, fn), return_type, ArrowUDFType.SCALAR_ITER)


def _whole_partition(fn, batches):
    """`fn` on the concatenated columns of all `batches`, cut back into their lengths."""
    chunks = [b if isinstance(b, tuple) else (b,) for b in batches]
    if not chunks:
        return
    columns = [pa.concat_arrays([c[i] for c in chunks]) for i in range(len(chunks[0]))]
    out = fn(*columns)
    start = 0
    for c in chunks:
        yield out.slice(start, len(c[0]))
        start += len(c[0])


def group_results(fn, rows, key: str, groups: int = 0) -> list:
    """`fn` applied to the rows of each value of the DataFrame column `key` (integers) in
    executors, the results pickled back: the rows hashed by `key` (into `groups` shuffle
    partitions when given, one per group; else as many as adaptive execution leaves) and each
    partition's rows cut into its groups in Python (`mapInArrow`: no sort by `key`, which
    `groupBy(key).applyInArrow` would add)."""
    # (`groups` given: left to adaptive execution, a small batch's groups would be coalesced into
    # one partition and every group run in a single task)
    hashed = rows.repartition(groups, key) if groups else rows.repartition(key)
    out = hashed.mapInArrow(partial(_partition_groups, fn, key), "result binary")
    return [pickle.loads(r[0]) for r in out.collect()]


def _partition_groups(fn, key: str, batches):
    """`fn`'s pickled result for each group of one partition's rows (a group's rows are all in
    its partition: the partition's rows are held at once, where `applyInArrow` holds one
    group's; hashing n groups into n partitions puts two or three in some)."""
    from airflow_lake.core.engine import group_slices

    batches = list(batches)
    if not batches:  # (a partition no group hashed to)
        return
    rows = pa.Table.from_batches(batches)
    del batches
    groups = group_slices(rows, key)
    del rows  # (the groups are slices of a copy in group order when the rows came unordered)
    for group in groups:
        yield pa.record_batch({"result": pa.array([pickle.dumps(fn(group))], pa.binary())})
