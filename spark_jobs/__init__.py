"""spark-submit entry points, one per table service; installed as `airflow_lake/spark/jobs/`.

Thin: each parses its flags and calls its one function of `airflow_lake.spark.services` (which
opens the table on a `SparkEngine` and calls the core service); `airflow_lake.spark.job` prints
the JSON line. Find a job's file with `airflow_lake.spark.job_path(name)`.
"""
