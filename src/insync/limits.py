"""Every hard bound in insync that is not a user setting, in one place (TigerBeetle style: nothing unbounded).

Settings a Kafka operator knows (`message.max.bytes`, `socket.request.max.bytes`, ...) live in the key table
(`config_keys.py`). These are the limits behind them: sizes of in-memory structures, retry counts, queue depths.
"""

from __future__ import annotations

# Storage
SEGMENTS_PER_PARTITION_MAX = 100_000
BATCHES_PER_READ_MAX = 100_000
RECOVERY_BATCHES_MAX = 10_000_000
CHECKPOINT_ENTRIES_MAX = 1_000_000
CHECKPOINT_BYTES_MAX = 64 * 1024 * 1024
LEADER_EPOCH_ENTRIES_MAX = 100_000
RECORDS_PER_BATCH_MAX = 1_000_000
DECOMPRESSED_BATCH_BYTES_MAX = 256 * 1024 * 1024

# Replication
PARTITIONS_PER_BROKER_MAX = 100_000
PENDING_READS_PER_REPLICA_MAX = 1_024
PURGATORY_ENTRIES_MAX = 100_000
FETCHER_PARTITIONS_MAX = 100_000
TRUNCATION_ROUNDS_MAX = 64
PRODUCER_BATCHES_REMEMBERED = 5  # Kafka keeps the last five batches per producer for duplicate detection

# Controller
BROKERS_MAX = 10_000
METADATA_RECORDS_PER_BATCH_MAX = 10_000  # Kafka's QuorumController.MAX_RECORDS_PER_BATCH (and per user operation)
# Records one metadata fetch brings a broker, which applies them in one turn of its event loop: a committed batch at
# most, so a broker fenced with 10,000 partitions moves every leadership in one round trip, while an apply of about
# a second stays well inside the heartbeat interval.
METADATA_RECORDS_PER_FETCH_MAX = METADATA_RECORDS_PER_BATCH_MAX
ACLS_MAX = 10_000  # ACLs a cluster holds: the authorizer scans them per decision (security/authorizer.py)
ALTER_PARTITION_ITEMS_MAX = 10_000

# Network
INFLIGHT_REQUESTS_PER_CONNECTION_MAX = 100
EVENTS_BUFFERED_MAX = 100_000

# Idempotent producers (replication/producer_state.py)
PRODUCERS_PER_PARTITION_MAX = 100_000
# Transactions (replication/transactions.py): aborted transactions a partition remembers (read_committed fetches
# list them), and completed ones whose markers may still lie above the high watermark
ABORTED_TXNS_PER_PARTITION_MAX = 100_000
UNREPLICATED_TXNS_MAX = 10_000

# Controller (metadata log; no snapshots yet, so the whole log stays in memory)
METADATA_LOG_RECORDS_MAX = 10_000_000

# Spark data source (spark/source/datasource.py, spark/source/kafka_io.py)
SPARK_SOURCE_PARTITIONS_MAX = 100_000  # topic-partitions one query may read

# Spark analysis (spark/analysis/inputs.py, spark/analysis/logparse.py, spark/analysis/report.py)
ANALYSIS_INPUT_FILES_MAX = 100_000  # log files one `insync analyze` run reads
ANALYSIS_MALFORMED_TEXT_CHARS_MAX = 300  # characters of a malformed line kept as its example
ANALYSIS_REPORT_ROWS_MAX = 50  # rows per table in report.html (the parquet tables hold all of them)
