"""`python -m airflow_lake.cli`: the `airflow-lake` console script."""

from .app import main

main()
