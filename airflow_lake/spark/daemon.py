"""The executors' Python worker daemon for local masters (`spark.python.daemon.module`, set by
`session()`): pyspark's own daemon, started on the installed, compiled pyspark when it is the
same code as Spark's zip (`pythonpath`), so neither the daemon nor the workers it forks compile
pyspark from source."""

from airflow_lake.spark.pythonpath import prefer_installed_pyspark

if __name__ == "__main__":
    prefer_installed_pyspark()
    from pyspark import daemon

    daemon.manager()
