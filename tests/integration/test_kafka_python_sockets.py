"""kafka-python (a test client) closes the socket of a connection a broker refused.

kafka-python 3.0.12's `KafkaNetSocket.sock_connect` raises without closing its socket when a
connection is refused. Tests that kill a broker a kafka-python client talks to then leave open
sockets behind, and the garbage collector finds them in whichever later test it happens to run:
pytest turns the ResourceWarning into that test's failure (test_mirror.py once,
test_metadata_restart.py another time). `tests/integration/conftest.py` mends the client.
"""

from __future__ import annotations

import gc
import warnings

import pytest
from kafka import KafkaAdminClient
from kafka.errors import KafkaError

from ..ports import free_port

pytestmark = pytest.mark.integration


def test_a_refused_connection_leaves_no_socket_open() -> None:
    refusing = f"127.0.0.1:{free_port()}"  # nothing listens there
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        with pytest.raises(KafkaError):
            KafkaAdminClient(bootstrap_servers=refusing, bootstrap_timeout_ms=2000)
        gc.collect()
    leaked = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaked == []
