"""Indexes: tag incoming record keys with the file group that holds them.

`hoodie.index.type`: BLOOM (default), SIMPLE, GLOBAL_BLOOM, GLOBAL_SIMPLE, BUCKET.
"""

from __future__ import annotations

from ..errors import InvalidOptionError
from . import bloom, simple
from .simple import Tags

INDEX_TYPES = ("BLOOM", "SIMPLE", "GLOBAL_BLOOM", "GLOBAL_SIMPLE", "BUCKET")


def check_index_type(index_type: str, where: str) -> str:
    index_type = index_type.upper()
    if index_type not in INDEX_TYPES:
        raise InvalidOptionError(f"{where}: hoodie.index.type={index_type!r} is not one of {INDEX_TYPES}")
    return index_type


def tagger(index_type: str):
    """The tag function of a key-lookup index (BUCKET needs none)."""
    return bloom.tag if index_type.endswith("BLOOM") else simple.tag


__all__ = ["INDEX_TYPES", "Tags", "check_index_type", "tagger"]
