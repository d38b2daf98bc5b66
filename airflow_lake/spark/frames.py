"""The work columns the distributed write adds to the rows (none reaches a file), the plan of
one file group's write, and Spark actions that fail with the core's errors."""

from __future__ import annotations

import re
from dataclasses import dataclass

from airflow_lake.core.errors import LakeError
from airflow_lake.core.merge import KEY
from airflow_lake.core.model import BaseFile
from airflow_lake.core.write.logs import SliceRef

PART = "_hoodie_partition_path"
DEL = "_al_delete"
SEQ = "_al_seq"
LOC_P = "_al_loc_partition"  # where the index found the key (null: a new key)
LOC_F = "_al_loc_file"
STORED = "_al_stored_ordering"  # the stored record's ordering value
TARGET = "_al_target"  # the file group (plan id) a row is written to
BUCKET = "_al_bucket"
LOOKUP_KEY = "_al_lookup_key"
CANDIDATE = "_al_candidate"  # a file group whose key range holds the key
KEYS_READ = "_al_keys_read"  # (a tagging summary row) whether the group's keys were read
WORK = (KEY, PART, DEL, SEQ)


@dataclass(frozen=True)
class GroupPlan:
    """One file group's write: `merge` (rewrite a base file), `log` (a new log file), `insert`.
    `whole`: every row of a merge is matched against the file (the bucket index), not only
    the located ones; `inserts`: rows of a log that are new records (a new bucket)."""

    kind: str
    partition: str
    file_id: str
    base: BaseFile | None = None
    slice: SliceRef | None = None
    whole: bool = False
    inserts: int = 0


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
