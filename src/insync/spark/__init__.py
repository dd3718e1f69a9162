"""insync on Apache Spark, in two halves that share nothing.

- `source/`: the `insync` data source (`spark.read.format("insync")`), which reads and writes topics over the
  Kafka protocol only, so it works against any Kafka-compatible cluster.
- `analysis/`: the replication-health analysis (`insync analyze`) of brokers' `events.jsonl` and Kafka
  `server.log` files.

Beside them, `session` builds the one SparkSession configuration both use (UTC, loopback for local masters),
and `sweep` runs simulation sweeps as Spark tasks (a map function the CLI hands to `sim.sweep`).
"""
