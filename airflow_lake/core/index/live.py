"""The live record keys of file groups, as the key-lookup indexes read them (a `KeyReader`
value: picklable, so an engine may run it in another process)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from ..context import TableContext
from ..merge import KEY
from ..model import BaseFile
from ..read import SliceRead, group_read, read_group_records
from ..view import FileSystemView
from .simple import read_keys


@dataclass(frozen=True)
class LiveKeys:
    """Keys of the file group whose latest base file is given: the base file's keys, or,
    when its slice has log files (which may delete keys), the keys of the merged slice
    (`merged`: the read task of each such group, planned on the driver)."""

    ctx: TableContext
    schema: pa.Schema  # the table schema with meta fields
    merged: dict[tuple[str, str], SliceRead]

    @staticmethod
    def of(ctx: TableContext, view: FileSystemView, files: list[BaseFile], schema: pa.Schema) -> LiveKeys:
        """The reader of these latest base files' groups in `view`."""
        merged = {}
        for base in files:
            group = view.groups[base.partition][base.file_id]
            if view.read_slice(group)[1]:
                merged[(base.partition, base.file_id)] = group_read(view, group, schema, [KEY], ctx.config)
        return LiveKeys(ctx, schema, merged)

    def __call__(self, base: BaseFile) -> pa.Array:
        task = self.merged.get((base.partition, base.file_id))
        if task is None:
            return read_keys(self.ctx.storage, base, self.ctx.keygen, self.ctx.config.populate_meta_fields)
        return read_group_records(self.ctx, task, self.schema, [KEY]).column(KEY).combine_chunks()
