"""The Kafka APIs the listener serves: every module's APIS, in one list.

ApiVersions is not in `ALL_APIS`: the listener builds it from this list (`api_versions_api`), so
its table always names exactly what is served.
"""

from __future__ import annotations

from pykraft.broker.kafka.api import Api
from pykraft.broker.kafka.apis import metadata

ALL_APIS: tuple[Api, ...] = (*metadata.APIS,)
