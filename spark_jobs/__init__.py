"""spark-submit entry points, one per table service; installed as `airflow_lake/spark/jobs/`.

Thin: parse arguments, open the table on a `SparkEngine`, call one core service, print one
JSON line (`airflow_lake.spark.job`). Find a job's file with `airflow_lake.spark.job_path(name)`.
"""
