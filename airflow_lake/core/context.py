"""`TableContext`: a picklable value from which any process (a Spark executor, a worker
thread) rebuilds a table's storage, configuration and key generator.

Functions handed to an engine take a context and small task values, never the `Table`
facade, so they can run where the driver's objects are not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .config import Option, TableConfig, options_value
from .keys import KeyGenerator
from .storage import Storage, open_storage


@dataclass(frozen=True)
class TableContext:
    """Where a table is (URI and storage options), its `hoodie.properties`, and the write
    options of the operation."""

    uri: str
    props: dict[str, str]
    options: dict[str, Any] = field(default_factory=dict, repr=False)  # (may hold Hudi's own credentials)
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False)  # (credentials)

    @staticmethod
    def of(table) -> TableContext:
        """The context of an open `Table`. In this process it shares the table's `Storage`
        (one client, one count of storage calls) and `TableConfig`; pickled, it carries only
        the values."""
        ctx = TableContext(table.storage.uri, dict(table.config.props), dict(table.options),
                           dict(getattr(table, "storage_options", None) or {}))
        ctx.__dict__["storage"] = table.storage
        ctx.__dict__["config"] = table.config  # (one configuration: a transaction's changes show on the table)
        return ctx

    def __getstate__(self) -> dict[str, Any]:
        # only the values travel; storage, config and key generator are rebuilt where used
        return {"uri": self.uri, "props": self.props, "options": self.options, "storage_options": self.storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @cached_property
    def storage(self) -> Storage:
        return open_storage(self.uri, self.storage_options)

    @cached_property
    def config(self) -> TableConfig:
        return TableConfig(dict(self.props))

    @cached_property
    def keygen(self) -> KeyGenerator:
        return KeyGenerator.for_table(self.config, self.uri, self.options)

    def option(self, option: Option) -> Any:
        return options_value(self.options, option, self.props)
