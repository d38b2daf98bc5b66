"""The work columns the distributed write adds to the rows (none reaches a file), the plan of
one file group's write, and Spark actions that fail with the core's errors."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_lake.core.errors import LakeError

# the core's work columns and group plan, for the Spark stages
from airflow_lake.core.write.execute import DEL, LOC_F, PART, SEQ, TARGET, WORK, GroupPlan  # noqa: F401

LOC_P = "_al_loc_partition"  # where the index found the key (null: a new key; LOC_F its group)
STORED = "_al_stored_ordering"  # the stored record's ordering value
BUCKET = "_al_bucket"
LOOKUP_KEY = "_al_lookup_key"
CANDIDATE = "_al_candidate"  # a file group whose key range holds the key
KEYS_READ = "_al_keys_read"  # (a tagging summary row) whether the group's keys were read


def stage(action, where: str, what: str):
    """Run a Spark action; an error raised by the core in an executor comes back as that
    error's text, naming the table (not a Java stack trace)."""
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
            raise cls(message.strip()) from None
        raise


def scalar_arrow_udf(fn, return_type):
    """`fn` (Arrow arrays in, one array out) as a scalar Arrow UDF: only the columns it is
    given go to Python. (`fn` may be a partial, which has no type hints to infer the kind from.)"""
    from pyspark.sql.functions import ArrowUDFType, arrow_udf

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "It is preferred to specify type hints", UserWarning)
        return arrow_udf(fn, return_type, ArrowUDFType.SCALAR)


def group_ids(names: pa.Array, groups: dict[str, int]) -> np.ndarray:
    """The group id of each name (`groups`: name -> id); -1 where the name is null or unknown."""
    if not groups:
        return np.full(len(names), -1, dtype=np.int64)
    ids = np.append(np.asarray(list(groups.values()), dtype=np.int64), -1)
    pos = pc.index_in(names, value_set=pa.array(list(groups), pa.string())).fill_null(-1)
    return ids[pos.to_numpy(zero_copy_only=False).astype(np.int64)]
