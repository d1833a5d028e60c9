"""Folio for Apache Spark: a PySpark data source (``pip install 'folio[spark]'``).

    import folio.spark
    folio.spark.register(spark)
    df = (spark.read.format("folio").option("endpoint", "localhost:7070")
          .option("topic", "clicks").load())

Batch and streaming reads (``spark.read`` / ``spark.readStream``) and
exactly-once writes (``df.write`` / ``df.writeStream``); ``docs/spark.md``
has the options, the schema and how each guarantee is kept. Workers must be
able to import ``folio`` (and run the same Python: ``PYSPARK_PYTHON``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from folio.spark.source import FolioDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["FolioDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Registers the data source with ``spark`` under the short name ``"folio"``."""
    spark.dataSource.register(FolioDataSource)
