"""The live record keys of file groups, as the key-lookup indexes read them (a `KeyReader`
value: picklable, so an engine may run it in another process)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from ..context import TableContext
from ..merge import KEY
from ..model import BaseFile
from ..slice_reader import SliceQuery, SliceRead, Visibility, read_file_group
from ..view import FileSystemView


@dataclass(frozen=True)
class LiveKeys:
    """Keys of the file group whose latest base file is given: the keys of its slice, base
    file and visible log blocks (which may delete keys) merged, read by the file-group reader
    from the group's read task (`slices`, planned on the driver)."""

    ctx: TableContext
    schema: pa.Schema  # the table schema with meta fields
    slices: dict[tuple[str, str], SliceRead]

    @staticmethod
    def of(ctx: TableContext, view: FileSystemView, files: list[BaseFile], schema: pa.Schema) -> LiveKeys:
        """The reader of these latest base files' groups in `view`."""
        visibility, query = Visibility.of(view), SliceQuery()
        return LiveKeys(ctx, schema, {(b.partition, b.file_id): SliceRead.of(
            view, view.groups[b.partition][b.file_id], visibility, query) for b in files})

    def __call__(self, base: BaseFile) -> pa.Array:
        task = self.slices[(base.partition, base.file_id)]
        read = read_file_group(self.ctx, task, self.schema, [KEY], derived_keys=True)
        return read.rows.column(KEY).combine_chunks()
