"""The translation layer between Kafka's wire types (kio entities, any supported version) and insync's internal
messages. Pure functions: no I/O, no asyncio, no clock; the server's dispatchers (`server.broker_apis.ROUTES`,
`server.controller_node`) call them around the cores. Generic kio helpers live in `protocol.kio`.

One module per API group: `versions` (ApiVersions), `produce`, `fetch`, `metadata` (with DescribeCluster),
`describe_topic_partitions`, `offsets` (ListOffsets, OffsetForLeaderEpoch, DeleteRecords), `producer_id`,
`log_dirs`, `producers`, `topics`, `configs`, `groups`, `controller_apis` (registration, heartbeat and
AlterPartition, both halves), `metadata_log` (the brokers' Fetch of `__cluster_metadata`),
`replica_log_report` (KIP-966's reports), `internal` (what the controller answers for CreateTopics and
DeleteTopics) and `entities` (shared mechanics). The shape is the same everywhere:
`decode_*(DecodedRequest, ...) -> Decoded[internal request]` (with the version, how topics were named, and what
the translator answers itself), the core answers, and `encode_*(internal response, decoded) -> kio response
body` of the request's version.
"""
