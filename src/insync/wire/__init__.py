"""The translation layer between Kafka's wire types (kio entities, any supported version) and insync's internal
messages. Pure functions: no I/O, no asyncio, no clock; the server's dispatcher (`server.broker_node.ROUTES`,
`server.controller_node`) calls them around the cores. The internal messages a broker core answers live in
`broker.messages`; generic kio helpers (`build`, `nested`, `field_or`, ...) in `protocol.kio`.

Per API group, one module:
- `versions`: the ApiVersions tables (broker and controller listeners) and responses, incl. the error-35 body.
- `produce`, `fetch`: Produce and Fetch (consumer and follower forms; the follower's client side too).
- `metadata`: Metadata and DescribeCluster, answered from a `MetadataImage`.
- `describe_topic_partitions`: DescribeTopicPartitions (KIP-966's paged describe with the ELR), from the image.
- `offsets`: ListOffsets, OffsetForLeaderEpoch, DeleteRecords, which `BrokerCore.handle` answers
  (`broker.queries`).
- `producer_id`: InitProducerId, answered by `BrokerCore.handle` too (its `ProducerIdAllocator`).
- `log_dirs`: DescribeLogDirs, AlterReplicaLogDirs; `producers`: DescribeProducers; answered by `BrokerCore.handle`
  (`broker.log_dirs`, `broker.producers`).
- `topics`: CreateTopics, DeleteTopics (one controller call per topic).
- `configs`: DescribeConfigs (topic configs from the image, broker configs from `BrokerConfig`).
- `groups`: the consumer-group APIs, for the group coordinator.
- `controller_apis`: BrokerRegistration, BrokerHeartbeat, AlterPartition, both the broker's and the
  controller's halves.
- `metadata_log`: how brokers fetch the controller's metadata records (a Fetch of `__cluster_metadata`).
- `replica_log_report`: the replica log reports brokers send the controller (KIP-966's unclean recovery).
- `internal`: the internal requests/responses of CreateTopics and DeleteTopics, which the controller answers.
- `entities`: the shared mechanics (version-agnostic entity building, topic keys, error codes).

The shape is the same everywhere: `decode_*(DecodedRequest, ...) -> Decoded[internal request]` (with the
version, how topics were named, and what the translator answers itself), the core answers, and
`encode_*(internal response, decoded) -> kio response body` of the request's version.
"""
