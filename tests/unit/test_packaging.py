"""pyproject.toml's metadata in the form current setuptools takes without a warning.

``license = { text = ... }`` made setuptools (>= 77) print its deprecation
banner on every editable install (twice in ``make run``); the SPDX string form
needs setuptools >= 77 to build, so the build requirement says so.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

_PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_license_is_an_spdx_expression_and_setuptools_can_read_it() -> None:
    document = tomllib.loads(_PYPROJECT.read_text())
    assert document["project"]["license"] == "Apache-2.0"
    assert not any(c.startswith("License ::") for c in document["project"].get("classifiers", []))
    setuptools = [r for r in document["build-system"]["requires"] if r.startswith("setuptools")]
    match = re.fullmatch(r"setuptools>=(\d+)", setuptools[0])
    assert match is not None and int(match[1]) >= 77, setuptools
