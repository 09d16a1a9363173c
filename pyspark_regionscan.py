"""Spark's automatic registration hook for the ``regionscan`` data source.

pyspark registers every top-level module named ``pyspark_*`` on the Python
path that exposes ``DefaultSource``, under the source's ``name()``, so
``spark.read.format("regionscan")`` works in any job whose Python path
holds this package (an installed distribution, or the repository root).
"""

from connector.python_source import RegionScanDataSource as DefaultSource

__all__ = ["DefaultSource"]
