"""airflow-lake."""
