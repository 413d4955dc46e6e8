"""The public API of `pykraft.client`, pinned: what `__all__` exports, that it is exactly the
package's public names, and that each one imports and carries its own documentation (as httpx's
tests/test_exported_members.py does).

Adding a public name is one line in PUBLIC_NAMES (kept sorted) besides the import in
`client/__init__.py`; removing or renaming one fails here first, on purpose.
"""

from __future__ import annotations

import importlib
import inspect
from types import ModuleType

import pytest

import pykraft.client

PUBLIC_NAMES = [
    "AdminClient",
    "BrokerIdNotRegisteredError",
    "BrokerInfo",
    "BrokerNotAvailableError",
    "BufferExhaustedError",
    "ClusterDescription",
    "CommitFailedError",
    "ConfigSource",
    "ConfigValue",
    "Consumer",
    "ConsumerGroupDescription",
    "ConsumerGroupListing",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ControllerInfo",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "CorruptMessageError",
    "DeliveryCounts",
    "DuplicateBrokerRegistrationError",
    "DuplicateSequenceNumberError",
    "ElectionNotNeededError",
    "ElectionResult",
    "EligibleLeadersNotAvailableError",
    "FencedInstanceIdError",
    "FencedLeaderEpochError",
    "FencedMemberEpochError",
    "FetchSessionIdNotFoundError",
    "FutureRecordMetadata",
    "GroupIdNotFoundError",
    "GroupState",
    "IllegalGenerationError",
    "IllegalStateError",
    "InconsistentClusterIdError",
    "InconsistentTopicIdError",
    "IneligibleReplicaError",
    "InvalidCommitOffsetSizeError",
    "InvalidConfigError",
    "InvalidFetchSessionEpochError",
    "InvalidFetchSizeError",
    "InvalidGroupIdError",
    "InvalidMetadataError",
    "InvalidPartitionsError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidRegularExpressionError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidRequiredAcksError",
    "InvalidSessionTimeoutError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "InvalidUpdateVersionError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaStorageError",
    "LeaderNotAvailableError",
    "ListOffsetsResult",
    "LogTruncationError",
    "MemberDescription",
    "MessageTooLargeError",
    "NetworkError",
    "NewLeaderElectedError",
    "NewTopic",
    "NoOffsetForPartitionError",
    "NoReassignmentInProgressError",
    "Node",
    "NonEmptyGroupError",
    "NotControllerError",
    "NotCoordinatorError",
    "NotEnoughReplicasAfterAppendError",
    "NotEnoughReplicasError",
    "NotLeaderOrFollowerError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "OffsetMetadataTooLargeError",
    "OffsetNotAvailableError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceNumberError",
    "PartitionInfo",
    "PartitionReassignment",
    "PolicyViolationError",
    "PreferredLeaderNotAvailableError",
    "Producer",
    "QuorumDescription",
    "ReassignmentInProgressError",
    "RebalanceInProgressError",
    "RecordListTooLargeError",
    "RecordMetadata",
    "ReplicaNotAvailableError",
    "RequestTimedOutError",
    "ResourceNotFoundError",
    "RetriableError",
    "StaleBrokerEpochError",
    "StaleControllerEpochError",
    "StaleMemberEpochError",
    "TopicAlreadyExistsError",
    "TopicCreated",
    "TopicDescription",
    "TopicPartition",
    "UnknownLeaderEpochError",
    "UnknownMemberIdError",
    "UnknownProducerIdError",
    "UnknownServerError",
    "UnknownTopicIdError",
    "UnknownTopicOrPartitionError",
    "UnreleasedInstanceIdError",
    "UnsupportedAssignorError",
    "UnsupportedVersionError",
    "VoterInfo",
    "arrow_schema",
    "error_for",
]


# Bound in the package by `from __future__ import annotations`, not part of its API.
FUTURE_FEATURES = {"annotations"}


def _public_members() -> list[str]:
    """Names the package binds without a leading '_', except submodules (bound by importing
    them) and `from __future__` features."""
    return sorted(
        name
        for name, value in vars(pykraft.client).items()
        if not name.startswith("_")
        and not isinstance(value, ModuleType)
        and name not in FUTURE_FEATURES
    )


def test_the_pin_is_sorted_and_without_duplicates() -> None:
    assert sorted(set(PUBLIC_NAMES)) == PUBLIC_NAMES


def test_all_is_the_pinned_list() -> None:
    assert pykraft.client.__all__ == PUBLIC_NAMES


def test_all_is_every_public_member_of_the_package() -> None:
    assert _public_members() == pykraft.client.__all__


@pytest.mark.parametrize("name", PUBLIC_NAMES)
def test_each_name_imports_from_the_package(name: str) -> None:
    module = importlib.import_module("pykraft.client")
    assert getattr(module, name) is vars(pykraft.client)[name]
    namespace: dict[str, object] = {}
    exec(f"from pykraft.client import {name}", namespace)
    assert namespace[name] is getattr(pykraft.client, name)


def _own_doc(value: object) -> str:
    """The object's own docstring: not one inherited from a base class, nor the signature
    line that @dataclass writes for an undocumented class."""
    if inspect.isclass(value):
        doc = value.__dict__.get("__doc__") or ""
        return "" if doc.startswith(f"{value.__name__}(") else doc
    return inspect.getdoc(value) or ""


@pytest.mark.parametrize("name", PUBLIC_NAMES)
def test_each_name_is_documented(name: str) -> None:
    doc = _own_doc(getattr(pykraft.client, name))
    assert len(doc.split()) >= 3, f"{name} needs a docstring saying what it is for"
