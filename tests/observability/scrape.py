"""Reading a ``/metrics`` page in tests: the URL from a ready line, samples by name and labels."""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping

from prometheus_client.parser import text_string_to_metric_families

from tests.support.bookies import BookieProcess

__all__ = ["Scrape", "metrics_url", "scrape", "wait_for"]

_METRICS_URL = re.compile(r"metrics on (?P<url>http://\S+/metrics)")


def metrics_url(process: BookieProcess) -> str:
    """The ``/metrics`` URL a ``folio`` server printed in its ready line."""
    match = _METRICS_URL.search(process.ready_line)
    if match is None:
        raise AssertionError(f"no metrics URL in {process.ready_line!r}")
    return match["url"]


class Scrape:
    """One ``/metrics`` page: its text, and sample values by name and labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: dict[str, list[tuple[dict[str, str], float]]] = {}
        #: Every metric family the page declares (``# TYPE``), samples or not.
        self.families: set[str] = set()
        for family in text_string_to_metric_families(text):
            self.families.add(family.name)
            for sample in family.samples:
                self.samples.setdefault(sample.name, []).append((sample.labels, sample.value))

    def value(self, name: str, **labels: str) -> float:
        """The sum of ``name``'s samples whose labels include ``labels`` (0 if none)."""
        return sum(value for sample_labels, value in self.samples.get(name, ())
                   if all(sample_labels.get(key) == want for key, want in labels.items()))

    def has(self, name: str) -> bool:
        """Whether ``name`` is a sample on the page, or a family it declares."""
        return name in self.samples or name in self.families


def scrape(url: str) -> Scrape:
    """GET ``url`` (a ``/metrics`` page) and parse it."""
    with urllib.request.urlopen(url, timeout=10) as response:
        return Scrape(response.read().decode())


def wait_for(url: str, condition: Callable[[Scrape], bool], *, timeout_s: float = 30.0,
             what: str = "condition") -> Scrape:
    """Scrape ``url`` until ``condition`` holds; the scrape that satisfied it.

    Raises:
        AssertionError: the deadline passed; names ``what`` and the last page's values.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        page = scrape(url)
        if condition(page):
            return page
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout_s} s; last page:\n"
                                 f"{_folio_lines(page)}")
        threading.Event().wait(0.05)  # poll interval: a condition over HTTP cannot be awaited


def _folio_lines(page: Scrape) -> str:
    return "\n".join(line for line in page.text.splitlines() if line.startswith("folio_"))


def labels_of(page: Scrape, name: str) -> list[Mapping[str, str]]:
    """The label sets of ``name``'s samples."""
    return [labels for labels, _ in page.samples.get(name, ())]
