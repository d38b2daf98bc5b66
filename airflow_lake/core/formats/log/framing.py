"""Block framing (spec §7.1, §7.3, §7.8): magic, sizes, header maps, trailer, corruption scan."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1


class BlockType(IntEnum):
    COMMAND = 0
    DELETE = 1
    CORRUPT = 2
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC_DATA = 6


class HeaderKey(IntEnum):
    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6
    IS_PARTIAL = 7
    BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS = 8


# A v6 writer emits only ordinals 0-4 (spec §7.3); readers accept 0-8.
_WRITABLE_KEYS = {HeaderKey.INSTANT_TIME, HeaderKey.TARGET_INSTANT_TIME, HeaderKey.SCHEMA,
                  HeaderKey.COMMAND_BLOCK_TYPE, HeaderKey.COMPACTED_BLOCK_TIMES}


def encode_map(entries: dict[HeaderKey, str]) -> bytes:
    parts = [struct.pack(">i", len(entries))]
    for key, value in entries.items():
        raw = value.encode("utf-8")
        parts.append(struct.pack(">ii", int(key), len(raw)))
        parts.append(raw)
    return b"".join(parts)


def decode_map(data: bytes, pos: int) -> tuple[dict[int, str], int]:
    (count,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out: dict[int, str] = {}
    for _ in range(count):
        key, length = struct.unpack_from(">ii", data, pos)
        pos += 8
        out[key] = data[pos : pos + length].decode("utf-8")
        pos += length
    return out, pos


def encode_block(block_type: BlockType, header: dict[HeaderKey, str], content: bytes) -> bytes:
    """One whole block: magic, blockSize, version, type, header, content, empty footer, trailer."""
    bad = [k for k in header if k not in _WRITABLE_KEYS]
    if bad:
        raise ValueError(f"header keys {bad} must not be written to a table-version-6 log")
    head = encode_map(header)
    footer = encode_map({})
    block_size = 4 + 4 + len(head) + 8 + len(content) + len(footer) + 8
    return b"".join([
        MAGIC,
        struct.pack(">q", block_size),
        struct.pack(">ii", LOG_FORMAT_VERSION, int(block_type)),
        head,
        struct.pack(">q", len(content)),
        content,
        footer,
        struct.pack(">q", block_size + 6),
    ])


@dataclass
class RawBlock:
    """A framed block as read: type, header, content; or a corrupt byte range."""

    offset: int
    block_type: BlockType
    header: dict[int, str]
    content: bytes
    corrupt_reason: str = ""


def _is_corrupt(data: bytes, size_pos: int, block_size: int) -> str:
    """Java's check: the trailer must equal blockSize + 6 and the next bytes be magic or EOF."""
    after_size = size_pos + 8
    trailer_pos = after_size + block_size - 8
    if block_size < 24 or trailer_pos + 8 > len(data):
        return "truncated block"
    (trailer,) = struct.unpack_from(">q", data, trailer_pos)
    if trailer - 6 != block_size:
        return f"trailer {trailer} does not match block size {block_size}"
    nxt = after_size + block_size
    if len(data) - nxt >= 6 and data[nxt : nxt + 6] != MAGIC:
        return "no magic after the block"
    return ""


def split_blocks(data: bytes) -> list[RawBlock]:
    """All blocks of a log file; a torn or garbage range becomes one CORRUPT block."""
    blocks: list[RawBlock] = []
    pos = 0
    n = len(data)
    while pos < n:
        if data[pos : pos + 6] != MAGIC:
            nxt = data.find(MAGIC, pos + 1)
            end = n if nxt < 0 else nxt
            blocks.append(RawBlock(pos, BlockType.CORRUPT, {}, data[pos:end], "no magic at block start"))
            pos = end
            continue
        if pos + 14 > n:
            blocks.append(RawBlock(pos, BlockType.CORRUPT, {}, data[pos:], "truncated block size"))
            break
        (block_size,) = struct.unpack_from(">q", data, pos + 6)
        reason = _is_corrupt(data, pos + 6, block_size)
        if reason:
            nxt = data.find(MAGIC, pos + 6)
            end = n if nxt < 0 else nxt
            blocks.append(RawBlock(pos, BlockType.CORRUPT, {}, data[pos:end], reason))
            pos = end
            continue
        body = pos + 14
        try:
            version, btype = struct.unpack_from(">ii", data, body)
            header, p = decode_map(data, body + 8)
            (content_len,) = struct.unpack_from(">q", data, p)
            content = data[p + 8 : p + 8 + content_len]
            if version != LOG_FORMAT_VERSION or len(content) != content_len:
                raise ValueError(f"log format version {version}")
            block_type = BlockType(btype)
        except (struct.error, ValueError, UnicodeDecodeError) as e:
            blocks.append(RawBlock(pos, BlockType.CORRUPT, {}, data[pos : body + block_size], str(e)))
        else:
            blocks.append(RawBlock(pos, block_type, header, content))
        pos = body + block_size
    return blocks
