"""``FolioDataSource``: Folio topics as a PySpark data source named ``"folio"``.

Spark pickles the reader and writer objects to its worker processes, so they
hold only options and plans; each ``read``/``write`` opens its own channel or
``Client`` (``batch``, ``stream``, ``sink``).
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from folio.errors import InvalidArgumentError
from folio.spark._options import ReadOptions, WriteOptions, value_format
from folio.spark._read import schema_ddl
from folio.spark.batch import FolioBatchReader
from folio.spark.sink import FolioStreamWriter, FolioWriter
from folio.spark.stream import FolioStreamReader

__all__ = ["FolioDataSource"]


class FolioDataSource(DataSource):
    """Reads and writes Folio topics: ``spark.read.format("folio")`` and friends.

    Options (keys are case-insensitive): see ``docs/spark.md``.
    """

    @classmethod
    def name(cls) -> str:
        return "folio"

    def schema(self) -> str:
        return schema_ddl(value_format(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        return FolioBatchReader(ReadOptions.parse(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return FolioStreamReader(ReadOptions.parse(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        _check_write(schema, overwrite)
        return FolioWriter(WriteOptions.parse(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        _check_write(schema, overwrite)
        return FolioStreamWriter(WriteOptions.parse(self.options))


def _check_write(schema: StructType, overwrite: bool) -> None:
    if overwrite:
        raise InvalidArgumentError("a Folio topic is append-only: use mode('append')")
    names = set(schema.fieldNames())
    if "payload" not in names:
        raise InvalidArgumentError(
            f"writing to Folio needs a 'payload' column (binary or string); the DataFrame has "
            f"{', '.join(sorted(names)) or 'no columns'}")
