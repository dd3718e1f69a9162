"""The replication-health analysis (`insync analyze`): from brokers' logs to the tables and the HTML report an
operator reads after an alert storm.

`inputs` finds the log files, `logparse` turns insync `events.jsonl` and Kafka `server.log` lines into one event
table, `health` derives the ISR changes, intervals, flapping and episodes from it, `job` writes them (`tables`)
as parquet with `summary.json`, `report` renders them as HTML (charts from `svg`), and `bench` generates large
synthetic logs to measure the analysis.
"""
