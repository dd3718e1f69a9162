"""insync on Apache Spark: the replication-health analysis (`insync analyze`) and, later, the `insync` data source.

`session` builds the one SparkSession configuration everything here uses (UTC, loopback for local masters),
`inputs` finds the log files, `logparse` turns insync `events.jsonl` and Kafka `server.log` lines into one event
table, `analysis` derives the tables an operator needs after an alert storm, `report` renders them as HTML, and
`bench` generates large synthetic logs to measure the analysis.
"""
