"""`airflow-lake`: inspect and operate tables from a shell, like hudi-cli without a JVM.

One module per command group (`table_cmds`, `timeline_cmds`, `service_cmds`, `read_cmd`,
`doctor`), the shared plumbing in `app` (options, errors, opening tables), `render` (human
tables and `--json`), `history` (instants with their state times), `picture` (the timeline
as SVG/PNG) and `spark` (`--spark`: the service jobs through spark-submit). Runs on the core;
imports neither Airflow nor pyspark.
"""

from .app import cli, main

__all__ = ["cli", "main"]
