"""The `insync` Spark data source: batch and streaming reads and writes of topics, over the Kafka protocol only.

`datasource` is what Spark calls (schema, partitions, offsets, commits), `kafka_io` plans offset ranges and
writes through confluent-kafka, `fetch_client` sends a task's own Fetch requests (framing in `fetch_wire`),
`arrow_records` decodes record batches straight into Arrow columns, and `worker_gc` spares reused Python
workers a full collection after each task. `bench` measures the source against Spark reading parquet
(`insync bench spark-source`).
"""
