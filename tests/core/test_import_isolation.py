"""`airflow_lake.core` must not import Airflow or pyspark (ARCHITECTURE.md, the one rule)."""

import subprocess
import sys


def test_core_imports_neither_airflow_nor_pyspark():
    code = (
        "import sys, airflow_lake.core, airflow_lake.core.table, airflow_lake.core.read;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'pyspark'));"
        "print(','.join(bad)); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, f"core imported: {proc.stdout} {proc.stderr}"
