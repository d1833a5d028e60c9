"""Fixtures of the Spark tests: ONE local Spark for the session, one standalone per module.

Spark runs as ``local[2,3]``: two task threads, and a failed task is tried up
to three times (plain ``local[2]`` never retries one), so a test can make a
first attempt fail. The UI is off and shuffles use two partitions. Workers run
this interpreter (``PYSPARK_PYTHON``) and import ``folio`` from the editable
install.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import SparkSession

import folio
import folio.spark
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.standalone import start_standalone


def _start_spark() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (SparkSession.builder.master("local[2,3]").appName("folio-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.execution.pythonUDF.arrow.enabled", "false")
               .config("spark.python.worker.reuse", "true")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    folio.spark.register(session)
    return session


# The JVM is started here, while this conftest is collected, not when the first
# Spark test asks for it: by then earlier tests' gRPC threads are running in this
# process, and pyspark's fork of the JVM launcher while gRPC is busy once made the
# launcher die ("Java gateway process exited before sending its port number"; grpc
# logged "Other threads are currently calling into gRPC, skipping fork() handlers").
_SESSION = _start_spark()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The session's SparkSession, with the ``folio`` data source registered."""
    yield _SESSION
    _SESSION.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookieProcess]:
    """A ``folio standalone`` for the module, stopped with SIGTERM at its end."""
    processes = BookieProcesses()
    started = start_standalone(processes, tmp_path_factory.mktemp("standalone") / "data")
    yield started
    try:
        started.terminate()
    finally:
        processes.kill_all()


@pytest.fixture
def client(server: BookieProcess) -> Iterator[folio.Client]:
    """A client of the module's server."""
    with folio.Client(server.address, timeout_s=30) as made:
        yield made
