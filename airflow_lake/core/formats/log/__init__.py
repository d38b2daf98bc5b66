"""The Hudi log format (spec §7): block framing, typed blocks, a corruption-tolerant reader."""

from .blocks import (
    CommandBlock,
    CorruptBlock,
    DataBlock,
    DeleteBlock,
    LogBlock,
    command_block_bytes,
    data_block_bytes,
    decode_block,
    delete_block_bytes,
    delete_block_content,
    read_log_file,
)
from .framing import BlockType, HeaderKey, encode_block

__all__ = [
    "BlockType", "CommandBlock", "CorruptBlock", "DataBlock", "DeleteBlock", "HeaderKey", "LogBlock",
    "command_block_bytes", "data_block_bytes", "decode_block", "delete_block_bytes", "delete_block_content",
    "encode_block",
    "read_log_file",
]
