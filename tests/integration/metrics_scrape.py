"""Scraping a node's /metrics (and other HTTP paths) in integration tests."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterable

from prometheus_client.parser import text_string_to_metric_families

from tests.ports import free_port

from .processes import NodeProcess

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def with_metrics(node: NodeProcess) -> str:
    """Adds `--metrics-listen` on a free port to `node`'s arguments; returns that address."""
    address = f"127.0.0.1:{free_port()}"
    node.args += ["--metrics-listen", address]
    return address


def http_get(address: str, path: str) -> tuple[int, str]:
    """The status and body of GET http://address/path (an error status is an answer too)."""
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def scrape(address: str) -> Samples:
    status, text = http_get(address, "/metrics")
    assert status == 200, text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def total(addresses: Iterable[str], name: str, **labels: str) -> float:
    """`name`'s samples (with `labels` among theirs) summed over every node of `addresses`."""
    wanted = set(labels.items())
    return sum(
        value
        for address in addresses
        for (sample, sample_labels), value in scrape(address).items()
        if sample == name and wanted <= set(sample_labels)
    )
