"""Every Kafka protocol error code as data.

Kafka error codes travel in responses as plain int16s; here each one is a frozen `KafkaError` with its code,
Kafka's upper-case name, whether a client may retry, and Kafka's own message. The table was generated from the
schema definitions Kafka publishes (through kio's `ErrorCode`), so names and codes match Kafka exactly.

Operating errors inside insync are raised as `KafkaException(error)` and turned into codes at the boundary
(the request handler), never deeper. Programmer errors are plain `assert`s.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KafkaError:
    code: int
    name: str
    retriable: bool
    message: str

    def __str__(self) -> str:
        return f"{self.name} ({self.code})"


class KafkaException(Exception):
    """An operating error that maps to a Kafka error code at the protocol boundary."""

    def __init__(self, error: KafkaError, detail: str = "") -> None:
        assert isinstance(error, KafkaError)
        self.error = error
        self.detail = detail
        super().__init__(f"{error.name}: {detail or error.message}")


ALL_ERRORS: tuple[KafkaError, ...] = (
    KafkaError(-1, 'UNKNOWN_SERVER_ERROR', False, 'The server experienced an unexpected error when processing the request.'),
    KafkaError(0, 'NONE', False, ''),
    KafkaError(1, 'OFFSET_OUT_OF_RANGE', False, 'The requested offset is not within the range of offsets maintained by the server.'),
    KafkaError(2, 'CORRUPT_MESSAGE', True, 'This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt.'),
    KafkaError(3, 'UNKNOWN_TOPIC_OR_PARTITION', True, 'This server does not host this topic-partition.'),
    KafkaError(4, 'INVALID_FETCH_SIZE', False, 'The requested fetch size is invalid.'),
    KafkaError(5, 'LEADER_NOT_AVAILABLE', True, 'There is no leader for this topic-partition as we are in the middle of a leadership election.'),
    KafkaError(6, 'NOT_LEADER_OR_FOLLOWER', True, 'For requests intended only for the leader, this error indicates that the broker is not the current leader. For requests intended for any replica, this error indicates that the broker is not a replica of the topic partition.'),
    KafkaError(7, 'REQUEST_TIMED_OUT', True, 'The request timed out.'),
    KafkaError(8, 'BROKER_NOT_AVAILABLE', False, 'The broker is not available.'),
    KafkaError(9, 'REPLICA_NOT_AVAILABLE', True, 'The replica is not available for the requested topic-partition. Produce/Fetch requests and other requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER if the broker is not a replica of the topic-partition.'),
    KafkaError(10, 'MESSAGE_TOO_LARGE', False, 'The request included a message larger than the max message size the server will accept.'),
    KafkaError(11, 'STALE_CONTROLLER_EPOCH', False, 'The controller moved to another broker.'),
    KafkaError(12, 'OFFSET_METADATA_TOO_LARGE', False, 'The metadata field of the offset request was too large.'),
    KafkaError(13, 'NETWORK_EXCEPTION', True, 'The server disconnected before a response was received.'),
    KafkaError(14, 'COORDINATOR_LOAD_IN_PROGRESS', True, "The coordinator is loading and hence can't process requests."),
    KafkaError(15, 'COORDINATOR_NOT_AVAILABLE', True, 'The coordinator is not available.'),
    KafkaError(16, 'NOT_COORDINATOR', True, 'This is not the correct coordinator.'),
    KafkaError(17, 'INVALID_TOPIC_EXCEPTION', False, 'The request attempted to perform an operation on an invalid topic.'),
    KafkaError(18, 'RECORD_LIST_TOO_LARGE', False, 'The request included message batch larger than the configured segment size on the server.'),
    KafkaError(19, 'NOT_ENOUGH_REPLICAS', True, 'Messages are rejected since there are fewer in-sync replicas than required.'),
    KafkaError(20, 'NOT_ENOUGH_REPLICAS_AFTER_APPEND', True, 'Messages are written to the log, but to fewer in-sync replicas than required.'),
    KafkaError(21, 'INVALID_REQUIRED_ACKS', False, 'Produce request specified an invalid value for required acks.'),
    KafkaError(22, 'ILLEGAL_GENERATION', False, 'Specified group generation id is not valid.'),
    KafkaError(23, 'INCONSISTENT_GROUP_PROTOCOL', False, "The group member's supported protocols are incompatible with those of existing members or first group member tried to join with empty protocol type or empty protocol list."),
    KafkaError(24, 'INVALID_GROUP_ID', False, 'The group id is invalid.'),
    KafkaError(25, 'UNKNOWN_MEMBER_ID', False, 'The coordinator is not aware of this member.'),
    KafkaError(26, 'INVALID_SESSION_TIMEOUT', False, 'The session timeout is not within the range allowed by the broker (as configured by group.min.session.timeout.ms and group.max.session.timeout.ms).'),
    KafkaError(27, 'REBALANCE_IN_PROGRESS', False, 'The group is rebalancing, so a rejoin is needed.'),
    KafkaError(28, 'INVALID_COMMIT_OFFSET_SIZE', False, 'The committing offset data size is not valid.'),
    KafkaError(29, 'TOPIC_AUTHORIZATION_FAILED', False, 'Topic authorization failed.'),
    KafkaError(30, 'GROUP_AUTHORIZATION_FAILED', False, 'Group authorization failed.'),
    KafkaError(31, 'CLUSTER_AUTHORIZATION_FAILED', False, 'Cluster authorization failed.'),
    KafkaError(32, 'INVALID_TIMESTAMP', False, 'The timestamp of the message is out of acceptable range.'),
    KafkaError(33, 'UNSUPPORTED_SASL_MECHANISM', False, 'The broker does not support the requested SASL mechanism.'),
    KafkaError(34, 'ILLEGAL_SASL_STATE', False, 'Request is not valid given the current SASL state.'),
    KafkaError(35, 'UNSUPPORTED_VERSION', False, 'The version of API is not supported.'),
    KafkaError(36, 'TOPIC_ALREADY_EXISTS', False, 'Topic with this name already exists.'),
    KafkaError(37, 'INVALID_PARTITIONS', False, 'Number of partitions is below 1.'),
    KafkaError(38, 'INVALID_REPLICATION_FACTOR', False, 'Replication factor is below 1 or larger than the number of available brokers.'),
    KafkaError(39, 'INVALID_REPLICA_ASSIGNMENT', False, 'Replica assignment is invalid.'),
    KafkaError(40, 'INVALID_CONFIG', False, 'Configuration is invalid.'),
    KafkaError(41, 'NOT_CONTROLLER', True, 'This is not the correct controller for this cluster.'),
    KafkaError(42, 'INVALID_REQUEST', False, 'This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.'),
    KafkaError(43, 'UNSUPPORTED_FOR_MESSAGE_FORMAT', False, 'The message format version on the broker does not support the request.'),
    KafkaError(44, 'POLICY_VIOLATION', False, 'Request parameters do not satisfy the configured policy.'),
    KafkaError(45, 'OUT_OF_ORDER_SEQUENCE_NUMBER', False, 'The broker received an out of order sequence number.'),
    KafkaError(46, 'DUPLICATE_SEQUENCE_NUMBER', False, 'The broker received a duplicate sequence number.'),
    KafkaError(47, 'INVALID_PRODUCER_EPOCH', False, 'Producer attempted to produce with an old epoch.'),
    KafkaError(48, 'INVALID_TXN_STATE', False, 'The producer attempted a transactional operation in an invalid state.'),
    KafkaError(49, 'INVALID_PRODUCER_ID_MAPPING', False, 'The producer attempted to use a producer id which is not currently assigned to its transactional id.'),
    KafkaError(50, 'INVALID_TRANSACTION_TIMEOUT', False, 'The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms).'),
    KafkaError(51, 'CONCURRENT_TRANSACTIONS', True, 'The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing.'),
    KafkaError(52, 'TRANSACTION_COORDINATOR_FENCED', False, 'Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer.'),
    KafkaError(53, 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED', False, 'Transactional Id authorization failed.'),
    KafkaError(54, 'SECURITY_DISABLED', False, 'Security features are disabled.'),
    KafkaError(55, 'OPERATION_NOT_ATTEMPTED', False, 'The broker did not attempt to execute this operation. This may happen for batched RPCs where some operations in the batch failed, causing the broker to respond without trying the rest.'),
    KafkaError(56, 'KAFKA_STORAGE_ERROR', True, 'Disk error when trying to access log file on the disk.'),
    KafkaError(57, 'LOG_DIR_NOT_FOUND', False, 'The user-specified log directory is not found in the broker config.'),
    KafkaError(58, 'SASL_AUTHENTICATION_FAILED', False, 'SASL Authentication failed.'),
    KafkaError(59, 'UNKNOWN_PRODUCER_ID', False, "This exception is raised by the broker if it could not locate the producer metadata associated with the producerId in question. This could happen if, for instance, the producer's records were deleted because their retention time had elapsed. Once the last records of the producerId are removed, the producer's metadata is removed from the broker, and future appends by the producer will return this exception."),
    KafkaError(60, 'REASSIGNMENT_IN_PROGRESS', False, 'A partition reassignment is in progress.'),
    KafkaError(61, 'DELEGATION_TOKEN_AUTH_DISABLED', False, 'Delegation Token feature is not enabled.'),
    KafkaError(62, 'DELEGATION_TOKEN_NOT_FOUND', False, 'Delegation Token is not found on server.'),
    KafkaError(63, 'DELEGATION_TOKEN_OWNER_MISMATCH', False, 'Specified Principal is not valid Owner/Renewer.'),
    KafkaError(64, 'DELEGATION_TOKEN_REQUEST_NOT_ALLOWED', False, 'Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels.'),
    KafkaError(65, 'DELEGATION_TOKEN_AUTHORIZATION_FAILED', False, 'Delegation Token authorization failed.'),
    KafkaError(66, 'DELEGATION_TOKEN_EXPIRED', False, 'Delegation Token is expired.'),
    KafkaError(67, 'INVALID_PRINCIPAL_TYPE', False, 'Supplied principalType is not supported.'),
    KafkaError(68, 'NON_EMPTY_GROUP', False, 'The group is not empty.'),
    KafkaError(69, 'GROUP_ID_NOT_FOUND', False, 'The group id does not exist.'),
    KafkaError(70, 'FETCH_SESSION_ID_NOT_FOUND', True, 'The fetch session ID was not found.'),
    KafkaError(71, 'INVALID_FETCH_SESSION_EPOCH', True, 'The fetch session epoch is invalid.'),
    KafkaError(72, 'LISTENER_NOT_FOUND', True, 'There is no listener on the leader broker that matches the listener on which metadata request was processed.'),
    KafkaError(73, 'TOPIC_DELETION_DISABLED', False, 'Topic deletion is disabled.'),
    KafkaError(74, 'FENCED_LEADER_EPOCH', True, 'The leader epoch in the request is older than the epoch on the broker.'),
    KafkaError(75, 'UNKNOWN_LEADER_EPOCH', True, 'The leader epoch in the request is newer than the epoch on the broker.'),
    KafkaError(76, 'UNSUPPORTED_COMPRESSION_TYPE', False, 'The requesting client does not support the compression type of given partition.'),
    KafkaError(77, 'STALE_BROKER_EPOCH', False, 'Broker epoch has changed.'),
    KafkaError(78, 'OFFSET_NOT_AVAILABLE', True, 'The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing.'),
    KafkaError(79, 'MEMBER_ID_REQUIRED', False, 'The group member needs to have a valid member id before actually entering a consumer group.'),
    KafkaError(80, 'PREFERRED_LEADER_NOT_AVAILABLE', True, 'The preferred leader was not available.'),
    KafkaError(81, 'GROUP_MAX_SIZE_REACHED', False, 'The group has reached its maximum size.'),
    KafkaError(82, 'FENCED_INSTANCE_ID', False, 'The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id.'),
    KafkaError(83, 'ELIGIBLE_LEADERS_NOT_AVAILABLE', True, 'Eligible topic partition leaders are not available.'),
    KafkaError(84, 'ELECTION_NOT_NEEDED', True, 'Leader election not needed for topic partition.'),
    KafkaError(85, 'NO_REASSIGNMENT_IN_PROGRESS', False, 'No partition reassignment is in progress.'),
    KafkaError(86, 'GROUP_SUBSCRIBED_TO_TOPIC', False, 'Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.'),
    KafkaError(87, 'INVALID_RECORD', False, 'This record has failed the validation on broker and hence will be rejected.'),
    KafkaError(88, 'UNSTABLE_OFFSET_COMMIT', True, 'There are unstable offsets that need to be cleared.'),
    KafkaError(89, 'THROTTLING_QUOTA_EXCEEDED', True, 'The throttling quota has been exceeded.'),
    KafkaError(90, 'PRODUCER_FENCED', False, 'There is a newer producer with the same transactionalId which fences the current one.'),
    KafkaError(91, 'RESOURCE_NOT_FOUND', False, 'A request illegally referred to a resource that does not exist.'),
    KafkaError(92, 'DUPLICATE_RESOURCE', False, 'A request illegally referred to the same resource twice.'),
    KafkaError(93, 'UNACCEPTABLE_CREDENTIAL', False, 'Requested credential would not meet criteria for acceptability.'),
    KafkaError(94, 'INCONSISTENT_VOTER_SET', False, 'Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters.'),
    KafkaError(95, 'INVALID_UPDATE_VERSION', False, 'The given update version was invalid.'),
    KafkaError(96, 'FEATURE_UPDATE_FAILED', False, 'Unable to update finalized features due to an unexpected server error.'),
    KafkaError(97, 'PRINCIPAL_DESERIALIZATION_FAILURE', False, 'Request principal deserialization failed during forwarding. This indicates an internal error on the broker cluster security setup.'),
    KafkaError(98, 'SNAPSHOT_NOT_FOUND', False, 'Requested snapshot was not found.'),
    KafkaError(99, 'POSITION_OUT_OF_RANGE', False, 'Requested position is not greater than or equal to zero, and less than the size of the snapshot.'),
    KafkaError(100, 'UNKNOWN_TOPIC_ID', True, 'This server does not host this topic ID.'),
    KafkaError(101, 'DUPLICATE_BROKER_REGISTRATION', False, 'This broker ID is already in use.'),
    KafkaError(102, 'BROKER_ID_NOT_REGISTERED', False, 'The given broker ID was not registered.'),
    KafkaError(103, 'INCONSISTENT_TOPIC_ID', True, "The log's topic ID did not match the topic ID in the request."),
    KafkaError(104, 'INCONSISTENT_CLUSTER_ID', False, 'The clusterId in the request does not match that found on the server.'),
    KafkaError(105, 'TRANSACTIONAL_ID_NOT_FOUND', False, 'The transactionalId could not be found.'),
    KafkaError(106, 'FETCH_SESSION_TOPIC_ID_ERROR', True, 'The fetch session encountered inconsistent topic ID usage.'),
    KafkaError(107, 'INELIGIBLE_REPLICA', False, 'The new ISR contains at least one ineligible replica.'),
    KafkaError(108, 'NEW_LEADER_ELECTED', False, 'The AlterPartition request successfully updated the partition state but the leader has changed.'),
    KafkaError(109, 'OFFSET_MOVED_TO_TIERED_STORAGE', False, 'The requested offset is moved to tiered storage.'),
    KafkaError(110, 'FENCED_MEMBER_EPOCH', False, 'The member epoch is fenced by the group coordinator. The member must abandon all its partitions and rejoin.'),
    KafkaError(111, 'UNRELEASED_INSTANCE_ID', False, 'The instance ID is still used by another member in the consumer group. That member must leave first.'),
    KafkaError(112, 'UNSUPPORTED_ASSIGNOR', False, 'The assignor or its version range is not supported by the consumer group.'),
    KafkaError(113, 'STALE_MEMBER_EPOCH', False, 'The member epoch is stale. The member must retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API.'),
    KafkaError(114, 'MISMATCHED_ENDPOINT_TYPE', False, 'The request was sent to an endpoint of the wrong type.'),
    KafkaError(115, 'UNSUPPORTED_ENDPOINT_TYPE', False, 'This endpoint type is not supported yet.'),
    KafkaError(116, 'UNKNOWN_CONTROLLER_ID', False, 'This controller ID is not known.'),
    KafkaError(117, 'UNKNOWN_SUBSCRIPTION_ID', False, 'Client sent a push telemetry request with an invalid or outdated subscription ID.'),
    KafkaError(118, 'TELEMETRY_TOO_LARGE', False, 'Client sent a push telemetry request larger than the maximum size the broker will accept.'),
    KafkaError(119, 'INVALID_REGISTRATION', False, 'The controller has considered the broker registration to be invalid.'),
    KafkaError(120, 'TRANSACTION_ABORTABLE', False, 'The server encountered an error with the transaction. The client can abort the transaction to continue using this transactional ID.'),
    KafkaError(121, 'INVALID_RECORD_STATE', False, 'The record state is invalid. The acknowledgement of delivery could not be completed.'),
    KafkaError(122, 'SHARE_SESSION_NOT_FOUND', True, 'The share session was not found.'),
    KafkaError(123, 'INVALID_SHARE_SESSION_EPOCH', True, 'The share session epoch is invalid.'),
    KafkaError(124, 'FENCED_STATE_EPOCH', False, 'The share coordinator rejected the request because the share-group state epoch did not match.'),
    KafkaError(125, 'INVALID_VOTER_KEY', False, "The voter key doesn't match the receiving replica's key."),
    KafkaError(126, 'DUPLICATE_VOTER', False, 'The voter is already part of the set of voters.'),
    KafkaError(127, 'VOTER_NOT_FOUND', False, 'The voter is not part of the set of voters.'),
    KafkaError(128, 'INVALID_REGULAR_EXPRESSION', False, 'The regular expression is not valid.'),
    KafkaError(129, 'REBOOTSTRAP_REQUIRED', False, 'Client metadata is stale. The client should rebootstrap to obtain new metadata.'),
    KafkaError(130, 'STREAMS_INVALID_TOPOLOGY', False, 'The supplied topology is invalid.'),
    KafkaError(131, 'STREAMS_INVALID_TOPOLOGY_EPOCH', False, 'The supplied topology epoch is invalid.'),
    KafkaError(132, 'STREAMS_TOPOLOGY_FENCED', False, 'The supplied topology epoch is outdated.'),
    KafkaError(133, 'SHARE_SESSION_LIMIT_REACHED', True, 'The limit of share sessions has been reached.'),
)

BY_CODE: dict[int, KafkaError] = {e.code: e for e in ALL_ERRORS}
BY_NAME: dict[str, KafkaError] = {e.name: e for e in ALL_ERRORS}


def by_code(code: int) -> KafkaError:
    """The error for `code`; an unknown code is UNKNOWN_SERVER_ERROR, as Kafka's clients treat it."""
    return BY_CODE.get(code, BY_CODE[-1])


def _e(name: str) -> KafkaError:
    return BY_NAME[name]


# The codes insync raises by name. Anything else is reachable through BY_NAME / by_code.
NONE = _e("NONE")
UNKNOWN_SERVER_ERROR = _e("UNKNOWN_SERVER_ERROR")
OFFSET_OUT_OF_RANGE = _e("OFFSET_OUT_OF_RANGE")
CORRUPT_MESSAGE = _e("CORRUPT_MESSAGE")
UNKNOWN_TOPIC_OR_PARTITION = _e("UNKNOWN_TOPIC_OR_PARTITION")
LEADER_NOT_AVAILABLE = _e("LEADER_NOT_AVAILABLE")
NOT_LEADER_OR_FOLLOWER = _e("NOT_LEADER_OR_FOLLOWER")
REQUEST_TIMED_OUT = _e("REQUEST_TIMED_OUT")
MESSAGE_TOO_LARGE = _e("MESSAGE_TOO_LARGE")
STALE_CONTROLLER_EPOCH = _e("STALE_CONTROLLER_EPOCH")
INVALID_TOPIC_EXCEPTION = _e("INVALID_TOPIC_EXCEPTION")
RECORD_LIST_TOO_LARGE = _e("RECORD_LIST_TOO_LARGE")
NOT_ENOUGH_REPLICAS = _e("NOT_ENOUGH_REPLICAS")
NOT_ENOUGH_REPLICAS_AFTER_APPEND = _e("NOT_ENOUGH_REPLICAS_AFTER_APPEND")
INVALID_REQUIRED_ACKS = _e("INVALID_REQUIRED_ACKS")
INVALID_TIMESTAMP = _e("INVALID_TIMESTAMP")
UNSUPPORTED_VERSION = _e("UNSUPPORTED_VERSION")
TOPIC_ALREADY_EXISTS = _e("TOPIC_ALREADY_EXISTS")
INVALID_PARTITIONS = _e("INVALID_PARTITIONS")
INVALID_REPLICATION_FACTOR = _e("INVALID_REPLICATION_FACTOR")
INVALID_REPLICA_ASSIGNMENT = _e("INVALID_REPLICA_ASSIGNMENT")
INVALID_REQUEST = _e("INVALID_REQUEST")
INVALID_CONFIG = _e("INVALID_CONFIG")
NOT_CONTROLLER = _e("NOT_CONTROLLER")
PREFERRED_LEADER_NOT_AVAILABLE = _e("PREFERRED_LEADER_NOT_AVAILABLE")
ELECTION_NOT_NEEDED = _e("ELECTION_NOT_NEEDED")
KAFKA_STORAGE_ERROR = _e("KAFKA_STORAGE_ERROR")
OUT_OF_ORDER_SEQUENCE_NUMBER = _e("OUT_OF_ORDER_SEQUENCE_NUMBER")
DUPLICATE_SEQUENCE_NUMBER = _e("DUPLICATE_SEQUENCE_NUMBER")
INVALID_PRODUCER_EPOCH = _e("INVALID_PRODUCER_EPOCH")
UNKNOWN_PRODUCER_ID = _e("UNKNOWN_PRODUCER_ID")
FENCED_LEADER_EPOCH = _e("FENCED_LEADER_EPOCH")
UNKNOWN_LEADER_EPOCH = _e("UNKNOWN_LEADER_EPOCH")
OFFSET_NOT_AVAILABLE = _e("OFFSET_NOT_AVAILABLE")
INVALID_UPDATE_VERSION = _e("INVALID_UPDATE_VERSION")
STALE_BROKER_EPOCH = _e("STALE_BROKER_EPOCH")
BROKER_ID_NOT_REGISTERED = _e("BROKER_ID_NOT_REGISTERED")
INELIGIBLE_REPLICA = _e("INELIGIBLE_REPLICA")
NEW_LEADER_ELECTED = _e("NEW_LEADER_ELECTED")
UNKNOWN_TOPIC_ID = _e("UNKNOWN_TOPIC_ID")
INCONSISTENT_TOPIC_ID = _e("INCONSISTENT_TOPIC_ID")
# the group coordinator's (groups/)
UNKNOWN_MEMBER_ID = _e("UNKNOWN_MEMBER_ID")
ILLEGAL_GENERATION = _e("ILLEGAL_GENERATION")
REBALANCE_IN_PROGRESS = _e("REBALANCE_IN_PROGRESS")
INCONSISTENT_GROUP_PROTOCOL = _e("INCONSISTENT_GROUP_PROTOCOL")
FENCED_INSTANCE_ID = _e("FENCED_INSTANCE_ID")
MEMBER_ID_REQUIRED = _e("MEMBER_ID_REQUIRED")
GROUP_MAX_SIZE_REACHED = _e("GROUP_MAX_SIZE_REACHED")
INVALID_SESSION_TIMEOUT = _e("INVALID_SESSION_TIMEOUT")
INVALID_GROUP_ID = _e("INVALID_GROUP_ID")
NOT_COORDINATOR = _e("NOT_COORDINATOR")
COORDINATOR_NOT_AVAILABLE = _e("COORDINATOR_NOT_AVAILABLE")
GROUP_ID_NOT_FOUND = _e("GROUP_ID_NOT_FOUND")
# SASL and SCRAM credentials (security/)
UNSUPPORTED_SASL_MECHANISM = _e("UNSUPPORTED_SASL_MECHANISM")
ILLEGAL_SASL_STATE = _e("ILLEGAL_SASL_STATE")
SASL_AUTHENTICATION_FAILED = _e("SASL_AUTHENTICATION_FAILED")
RESOURCE_NOT_FOUND = _e("RESOURCE_NOT_FOUND")
DUPLICATE_RESOURCE = _e("DUPLICATE_RESOURCE")
UNACCEPTABLE_CREDENTIAL = _e("UNACCEPTABLE_CREDENTIAL")
