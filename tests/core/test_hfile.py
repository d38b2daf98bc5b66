"""HFile (version 3) as Hudi's metadata table writes it, and the metadata table's `files`
partition: every HFile of the Hudi 1.x fixtures read (Hudi 1.0's HBase-written ones and 1.1's
native ones, base files and HFILE_DATA log blocks), the native ones rewritten byte for byte
from their cells, and the `files` listing equal to the files on storage."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from airflow_lake.core.formats.hfile import read_hfile, read_hfile_index, read_rows, write_hfile, write_hfile_columns
from airflow_lake.core.formats.log import read_log_file
from airflow_lake.core.formats.log.blocks import HFileBlock
from airflow_lake.core.metadata_table import has_files_partition, read_file_listing
from airflow_lake.core.table import Table
from airflow_lake.core.view import list_partition_files
from tests.core.test_hudi1x_read import TABLES, unpack


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("hfile")
    return {name: unpack(rel, base / name) for name, rel in TABLES.items()}


def hfiles(tables) -> list[tuple[str, bytes]]:
    """(name, bytes) of every HFile: MDT base files and the HFiles inside MDT log blocks."""
    out = []
    for name, path in sorted(tables.items()):
        for f in sorted((path / ".hoodie" / "metadata").rglob("*.hfile")):
            out.append((f"{name}/{f.name}", f.read_bytes()))
        for f in sorted((path / ".hoodie" / "metadata").rglob(".*.log.*")):
            for block in read_log_file(f.read_bytes(), str(f), hfile_blocks=True):
                if isinstance(block, HFileBlock):
                    out.append((f"{name}/{f.name}@{block.offset}", block.content))
    return out


def test_every_fixture_hfile_is_read(tables):
    found = hfiles(tables)
    assert len(found) > 150
    writers = set()
    for name, data in found:
        h = read_hfile(data, name)
        rows = [r for r, _ in h.cells]
        assert rows == sorted(set(rows)), name  # unsigned byte order, each row once
        assert b"schema" in h.info, name
        writers.add(data[-4:])
    assert writers == {b"\x03\x00\x00\x03", b"\x00\x00\x00\x03"}  # Hudi 1.0 (HBase) and 1.1 (native)


def test_native_hfiles_are_rewritten_byte_for_byte(tables):
    native = [(n, d) for n, d in hfiles(tables) if d[-4:] == b"\x00\x00\x00\x03"]
    assert len(native) > 50
    for name, data in native:
        h = read_hfile(data, name)
        assert write_hfile(h.cells, h.info, h.meta) == data, name


def test_hbase_hfiles_round_trip_and_the_writer_splits_blocks():
    cells = [(f"key-{i:05d}".encode(), b"v" * (i % 50)) for i in range(3000)]
    data = write_hfile(cells, {b"schema": b"{}"}, {"bloomFilter": b"/////w"}, block_size=4096)
    h = read_hfile(data)
    assert h.cells == cells and h.meta == {"bloomFilter": b"/////w"} and h.info[b"schema"] == b"{}"
    assert h.get(b"key-01234") == b"v" * (1234 % 50) and h.get(b"nope") is None
    empty = read_hfile(write_hfile([], {b"schema": b"{}"}))
    assert empty.cells == [] and empty.info[b"hfile.LASTKEY"] == b""
    with pytest.raises(ValueError, match="sorted"):
        write_hfile([(b"b", b""), (b"a", b"")])


@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_files_partition_lists_what_is_on_storage(tables, name):
    table = Table.open(str(tables[name]))
    if not has_files_partition(table.config.props):
        assert not (tables[name] / ".hoodie" / "metadata" / "files").exists()
        return
    on_disk = {p: {st.name: st.size for st in statuses} for p, statuses in list_partition_files(table.storage).items()}
    for data_timeline in (None, table.timeline):  # hudi-rs's rule, then Java's
        listing = read_file_listing(table.storage, data_timeline)
        assert listing.files == on_disk
        assert listing.partitions == sorted(on_disk)


def test_chosen_rows_are_read_from_the_blocks_that_may_hold_them(tables, monkeypatch):
    """Keyed reads (`read_hfile_index` + `read_rows`, what record-index lookups use) give what
    a full scan gives on every fixture HFile, base files and log blocks, HBase's and Hudi's."""
    checked = 0
    for name, data in hfiles(tables):
        full = read_hfile(data, name)
        index = read_hfile_index(lambda offset, length, d=data: d[offset:offset + length], len(data), name)
        assert index is not None and index.info == full.info, name
        rows = [r for r, _ in full.cells]
        probes = sorted(set(rows + [b"", b"\xff", b"0"] + [r + b"\x00" for r in rows]))
        assert read_rows(lambda offset, length, d=data: d[offset:offset + length], index, probes) == \
            dict(full.cells), name
        checked += 1
    assert checked > 150
    # a file of many blocks: neighbouring blocks in one request; apart, one read per block holding a
    # wanted row, none for a row not there
    cells = [(f"key-{i:07d}".encode(), i.to_bytes(4, "big") * 30) for i in range(30000)]
    data = write_hfile(cells, {b"schema": b"{}"}, block_size=64 * 1024)
    index = read_hfile_index(lambda offset, length: data[offset:offset + length], len(data))
    assert len(index.firsts) > 50
    reads = []

    def read_at(offset: int, length: int) -> bytes:
        reads.append(offset)
        return data[offset:offset + length]

    wanted = [b"key-0000005", b"key-0000006", b"key-0012345", b"key-0029999", b"key-1", b"zzz"]
    assert read_rows(read_at, index, wanted) == {r: v for r, v in cells if r in wanted}
    assert len(reads) == 1  # (the three blocks lie within READ_GAP of each other: one request)
    reads.clear()
    monkeypatch.setattr("airflow_lake.core.formats.hfile.READ_GAP", 0)
    assert read_rows(read_at, index, wanted) == {r: v for r, v in cells if r in wanted}
    assert len(reads) == 3  # (key-1 and zzz sort after every row: the last block, read once for three)


def test_a_keyed_read_finds_a_row_whose_bytes_also_sit_inside_an_earlier_cell():
    """The search for a row's cell key looks past a match inside another cell's key."""
    from airflow_lake.core.formats.hfile import read_hfile_index, read_row_columns

    rows = [b"ab\x00\x03abc", b"abc", b"abd"]
    data = write_hfile([(r, b"v-" + r) for r in rows])
    index = read_hfile_index(lambda offset, length: data[offset:offset + length], len(data))
    found_rows, values = read_row_columns(lambda offset, length: data[offset:offset + length], index,
                                          pa.array([b"abc", b"abd", b"zzz"], pa.binary()))
    assert dict(zip(found_rows.to_pylist(), values.to_pylist(), strict=True)) == {b"abc": b"v-abc", b"abd": b"v-abd"}


@pytest.mark.parametrize("tail", [b"", b"\x00"])
def test_a_keyed_read_of_many_blocks_finds_every_row_and_no_other(tail):
    """The rows are placed in blocks by a vectorised search over the blocks' first rows (rows
    ending in NUL, which fixed-width byte strings would drop, compared exactly)."""
    from airflow_lake.core.formats.hfile import read_hfile_index, read_row_columns

    cells = [(b"k-%06d" % i + tail, b"v%d" % i) for i in range(0, 20000, 2)]
    data = write_hfile_columns(pa.array([r for r, _ in cells], pa.binary()), pa.array([v for _, v in cells],
                                                                                      pa.binary()), block_size=1024)
    index = read_hfile_index(lambda offset, length: data[offset:offset + length], len(data))
    assert len(index.firsts) > 50
    wanted = sorted({b"k-%06d" % i + tail for i in range(0, 20000, 7)} | {b"a", b"zz", b"k-"})
    rows, values = read_row_columns(lambda offset, length: data[offset:offset + length], index,
                                    pa.array(wanted, pa.binary()))
    assert dict(zip(rows.to_pylist(), values.to_pylist(), strict=True)) == {r: v for r, v in cells if r in wanted}


@pytest.mark.parametrize("codec", ["gz", "none"])
def test_a_keyed_read_of_rows_of_every_length_finds_them_in_any_block(codec):
    """Rows of 0 to 600 bytes (root index keys whose Hadoop vlong length takes several bytes,
    cell keys whose row length needs both bytes), blocks searched and walked, GZ and NONE
    blocks, rows asked as binary or as chunks of large_binary: the keyed read gives what the
    full read gives."""
    from airflow_lake.core.formats.hfile import GZ, NONE, read_hfile_index, read_row_columns

    rows = sorted({b"r" * n + b"%03d" % i for n in (0, 1, 120, 125, 126, 127, 128, 255, 256, 600) for i in range(40)})
    cells = [(r, b"value of %d bytes" % len(r) * (1 + len(r) % 3)) for r in rows]
    data = write_hfile(cells, codec=GZ if codec == "gz" else NONE, block_size=2048)
    index = read_hfile_index(lambda offset, length: data[offset:offset + length], len(data))
    firsts = index.firsts.to_pylist()
    assert len(firsts) > 20 and firsts == sorted(firsts) and set(firsts) <= set(rows)
    assert any(len(f) + 2 >= 128 for f in firsts)  # (a root index key length of two vlong bytes)
    for wanted in (rows[::3], rows, [r + b"x" for r in rows[::5]] + [b"", b"\xff"]):
        wanted = sorted(set(wanted))
        # (as binary, and as chunks of large_binary: the same cells, binary)
        for asked in (pa.array(wanted, pa.binary()), pa.chunked_array([wanted[:7], wanted[7:]], pa.large_binary())):
            found, values = read_row_columns(lambda offset, length: data[offset:offset + length], index, asked)
            assert found.type == values.type == pa.binary()
            assert dict(zip(found.to_pylist(), values.to_pylist(), strict=True)) == \
                {r: v for r, v in cells if r in set(wanted)}


def test_a_damaged_block_is_a_clear_error_naming_the_file():
    """A keyed read of a block whose gzip stream or whose sizes are damaged raises
    InvalidTableError naming the file, never returns wrong cells."""
    from airflow_lake.core.errors import InvalidTableError
    from airflow_lake.core.formats.hfile import read_hfile_index, read_row_columns

    cells = [(b"key-%05d" % i, b"v" * 40) for i in range(3000)]
    data = write_hfile(cells, block_size=4096)
    index = read_hfile_index(lambda offset, length: data[offset:offset + length], len(data))
    offset, first = int(index.offsets[3]), index.firsts[3].as_py()
    for at, damage in ((offset + 33 + 20, b"\xff\xff\xff\xff"), (offset + 12, b"\x00\x00\x00\x07")):
        bad = data[:at] + damage + data[at + len(damage):]
        with pytest.raises(InvalidTableError, match="t/x.hfile: not a readable HFile"):
            read_row_columns(lambda o, n, d=bad: d[o:o + n], index,
                             pa.array([first, first + b"0"], pa.binary()), "t/x.hfile")
