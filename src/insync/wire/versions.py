"""ApiVersions: what each listener implements, and the ApiVersions response in every version.

The tables list exactly the APIs this package translates, since clients act on what is advertised (REFERENCE
13). Floors are Kafka 4.0's; ceilings the highest versions kio knows and the translators handle, except Fetch at
17 (v18 is for tiered storage) and InitProducerId at 5 (v6 is two-phase commit). The broker listener serves
clients and follower fetches; the controller listener what brokers send the controller (`metadata_log.py`
among it) and the admin requests they forward. From v3 the response carries feature flags (KIP-584):
`eligible.leader.replicas.version` (0-1) and the metadata image's finalized levels, as KRaft brokers answer;
features insync does not implement are not advertised, since clients would use their APIs, nor is
`metadata.version` (insync's metadata log is not KRaft's). An ApiVersions request above the table gets error 35
in a v0 body listing ApiVersions' own range (KIP-511), so the client retries with a version it can pick; another
API or version outside the table gets error 35 in that API's own response (`unsupported_api_response`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kio.index import KioIndexError

from insync import errors
from insync.errors import KafkaError
from insync.metadata.image import MetadataImage
from insync.metadata.records import ELR_FEATURE, TRANSACTION_VERSION_FEATURE
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import (
    NO_THROTTLE,
    build,
    build_defaults,
    check_body,
    code,
    field_names,
    nested,
    response_class,
)

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
CREATE_TOPICS = 19
DELETE_TOPICS = 20
DELETE_RECORDS = 21
INIT_PRODUCER_ID = 22
OFFSET_FOR_LEADER_EPOCH = 23
DESCRIBE_CONFIGS = 32
DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
ALTER_REPLICA_LOG_DIRS = 34
DESCRIBE_LOG_DIRS = 35
CREATE_PARTITIONS = 37
ELECT_LEADERS = 43
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
ALTER_CONFIGS = 33
INCREMENTAL_ALTER_CONFIGS = 44
API_VERSIONS = 18
ALTER_PARTITION = 56
DESCRIBE_CLUSTER = 60
DESCRIBE_PRODUCERS = 61
BROKER_REGISTRATION = 62
BROKER_HEARTBEAT = 63
DESCRIBE_TOPIC_PARTITIONS = 75
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42
OFFSET_DELETE = 47
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51
DESCRIBE_CLIENT_QUOTAS = 48
ALTER_CLIENT_QUOTAS = 49
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
WRITE_TXN_MARKERS = 27
TXN_OFFSET_COMMIT = 28
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66

BROKER_API_VERSIONS: Mapping[int, tuple[int, int]] = {
    PRODUCE: (3, 13),
    FETCH: (4, 17),
    LIST_OFFSETS: (1, 11),
    METADATA: (0, 13),
    API_VERSIONS: (0, 4),
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 6),
    CREATE_PARTITIONS: (0, 3),
    ELECT_LEADERS: (0, 2),
    ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    LIST_PARTITION_REASSIGNMENTS: (0, 0),
    DELETE_RECORDS: (0, 2),
    INIT_PRODUCER_ID: (0, 5),
    OFFSET_FOR_LEADER_EPOCH: (2, 4),
    DESCRIBE_CONFIGS: (1, 4),
    ALTER_CONFIGS: (0, 2),
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
    DESCRIBE_CLUSTER: (0, 2),
    DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ALTER_REPLICA_LOG_DIRS: (1, 2),
    DESCRIBE_LOG_DIRS: (1, 4),  # v5 (Kafka 4.2) adds cordoned log dirs
    DESCRIBE_PRODUCERS: (0, 0),
    DESCRIBE_ACLS: (1, 3),
    CREATE_ACLS: (1, 3),
    DELETE_ACLS: (1, 3),
    # Consumer groups, classic protocol. OffsetCommit/OffsetFetch stop at 9 (v10 names topics by id, KIP-848).
    OFFSET_COMMIT: (2, 9),
    OFFSET_FETCH: (1, 9),
    FIND_COORDINATOR: (0, 6),
    JOIN_GROUP: (0, 9),
    HEARTBEAT: (0, 4),
    LEAVE_GROUP: (0, 5),
    SYNC_GROUP: (0, 5),
    DESCRIBE_GROUPS: (0, 6),
    LIST_GROUPS: (0, 5),
    DELETE_GROUPS: (0, 2),
    OFFSET_DELETE: (0, 0),
    # SASL (answered by a SASL listener's gate, ILLEGAL_SASL_STATE elsewhere) and SCRAM credentials
    SASL_HANDSHAKE: (0, 1),
    SASL_AUTHENTICATE: (0, 2),
    DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    # Client quotas: none exist (described as none; changes refused), see wire/client_quotas.py
    DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ALTER_CLIENT_QUOTAS: (0, 1),
    # Transactions, with KIP-890's transaction version 2 (AddPartitionsToTxn v4+ is the brokers' batched form, by
    # which a partition leader verifies or adds a transactional batch's partition with its coordinator; EndTxn v5
    # bumps the epoch; TxnOffsetCommit v5 adds the offsets partition)
    ADD_PARTITIONS_TO_TXN: (0, 5),
    ADD_OFFSETS_TO_TXN: (0, 4),
    END_TXN: (0, 5),
    TXN_OFFSET_COMMIT: (0, 5),
    WRITE_TXN_MARKERS: (1, 1),
    DESCRIBE_TRANSACTIONS: (0, 0),
    LIST_TRANSACTIONS: (0, 2),
}

# The controller listener serves, at the broker listener's versions, Fetch (of the metadata log), ApiVersions, SASL,
# and the admin requests brokers forward; and, only there, what brokers send about themselves and their ISRs.
_CONTROLLER_SHARED_APIS = (
    FETCH, API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, ELECT_LEADERS, ALTER_PARTITION_REASSIGNMENTS,
    LIST_PARTITION_REASSIGNMENTS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS, SASL_HANDSHAKE, SASL_AUTHENTICATE,
    ALTER_USER_SCRAM_CREDENTIALS, CREATE_ACLS, DELETE_ACLS)
_CONTROLLER_ONLY_API_VERSIONS: Mapping[int, tuple[int, int]] = {
    ALTER_PARTITION: (2, 3),
    BROKER_REGISTRATION: (0, 4),
    BROKER_HEARTBEAT: (0, 2),
}
assert not _CONTROLLER_ONLY_API_VERSIONS.keys() & BROKER_API_VERSIONS.keys(), "a shared API takes the broker's range"
CONTROLLER_API_VERSIONS: Mapping[int, tuple[int, int]] = {
    **{key: BROKER_API_VERSIONS[key] for key in _CONTROLLER_SHARED_APIS}, **_CONTROLLER_ONLY_API_VERSIONS}

# Lowest versions advertised below what is served: Kafka lists Produce from v0 (PRODUCE_API_VERSIONS_RESPONSE_MIN_
# VERSION) because librdkafka refuses a broker whose Produce range starts above 0, and closes the connection on a
# v0-v2 request, as insync does for any version outside the table.
ADVERTISED_MIN_VERSIONS: Mapping[int, int] = {PRODUCE: 0}

# The feature flags insync implements: (lowest, highest) level.
SUPPORTED_FEATURES: Mapping[str, tuple[int, int]] = {ELR_FEATURE: (0, 1), TRANSACTION_VERSION_FEATURE: (0, 2)}
FEATURES_VERSION = 3
ZERO_FEATURE_LEVEL_VERSION = 4  # the first ApiVersions response that may list a supported feature from level 0

# Kafka's ApiVersionsRequest.isValid(): client software names and versions (v3+) must look like this.
_SOFTWARE_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def api_versions_response(version: int, table: Mapping[int, tuple[int, int]],
                          error: KafkaError = errors.NONE, image: MetadataImage | None = None) -> Any:
    """The ApiVersions response body of `version` listing `table`, and from v3 with `image` the feature flags
    (other v3+ tagged fields stay at their defaults, which kio then omits: what librdkafka 2.0.2 in kcat needs)."""
    assert 0 <= version <= 4, version
    cls = response_class(API_VERSIONS, version)
    api_version_cls = nested(cls, "ApiVersion")
    api_keys = tuple(build(api_version_cls, api_key=key, min_version=ADVERTISED_MIN_VERSIONS.get(key, low),
                           max_version=high) for key, (low, high) in sorted(table.items()))
    if version < FEATURES_VERSION or image is None:
        return build(cls, error_code=code(error), api_keys=api_keys, throttle_time=NO_THROTTLE)
    supported_cls, finalized_cls = nested(cls, "SupportedFeatureKey"), nested(cls, "FinalizedFeatureKey")
    # Below v4 Kafka leaves out features whose lowest level is 0: clients older than KIP-1022 reject a minimum of 0.
    supported = tuple(build(supported_cls, name=name, min_version=low, max_version=high)
                      for name, (low, high) in sorted(SUPPORTED_FEATURES.items())
                      if low > 0 or version >= ZERO_FEATURE_LEVEL_VERSION)
    finalized = tuple(build(finalized_cls, name=name, min_version_level=level, max_version_level=level)
                      for name, level in sorted(image.finalized_features.items()))
    return build(cls, error_code=code(error), api_keys=api_keys, throttle_time=NO_THROTTLE,
                 supported_features=supported, finalized_features=finalized,
                 finalized_features_epoch=image.offset - 1)  # the last record's offset; -1 before any


def unsupported_version_response(table: Mapping[int, tuple[int, int]]) -> Any:
    """The v0 body with UNSUPPORTED_VERSION for an ApiVersions request newer than the table (REFERENCE 13),
    listing ApiVersions' own versions only, as Kafka."""
    return api_versions_response(0, {API_VERSIONS: table[API_VERSIONS]}, errors.UNSUPPORTED_VERSION)


def unsupported_api_response(api_key: int, version: int, table: Mapping[int, tuple[int, int]]) -> Any | None:
    """The answer to a request outside `table`: for ApiVersions the v0 body above; for another API Kafka's error
    response (`AbstractRequest.getErrorResponse`, what its brokers send for an API they know but do not serve
    where they are), UNSUPPORTED_VERSION in the response's top-level error code. None when that version's
    response has no schema or no top-level error code (its errors are per entry of a request this broker cannot
    read): the connection then closes, as Kafka's SocketServer closes it for an API it does not enable."""
    if api_key == API_VERSIONS:
        return unsupported_version_response(table)
    try:
        cls = response_class(api_key, version)
    except KioIndexError:
        return None
    if "error_code" not in field_names(cls):
        return None
    error = errors.UNSUPPORTED_VERSION
    return build_defaults(cls, error_code=code(error), error_message=error.message, throttle_time=NO_THROTTLE)


def respond(request: DecodedRequest, table: Mapping[int, tuple[int, int]], image: MetadataImage | None = None
            ) -> Any:
    """The answer to an ApiVersions request the codec accepted, with the features of `image` (see the module
    docstring). Like Kafka, v3+ requests with a malformed client software name or version get INVALID_REQUEST and
    an empty table."""
    version = check_body(request.body, API_VERSIONS)
    if version >= 3:
        name = request.body.client_software_name
        software_version = request.body.client_software_version
        if not (_SOFTWARE_NAME.fullmatch(name) and _SOFTWARE_NAME.fullmatch(software_version)):
            return api_versions_response(version, {}, errors.INVALID_REQUEST)
    return api_versions_response(version, table, image=image)
