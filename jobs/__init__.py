"""Entry points people run: the ``regionscan`` CLI and the spark-submit jobs."""
