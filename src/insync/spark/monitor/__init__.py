"""`insync monitor`: the replication-health rules live, as a Spark Structured Streaming query over
`__insync_events` (rules.py the per-partition state machine, job.py the query, view.py what it shows)."""
