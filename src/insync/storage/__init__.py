"""Storage: Kafka's on-disk log layout, through a `Disk` interface.

`disk` (real and in-memory disks with fault injection), `checkpoint` (Kafka's checkpoint files), `index`
(sparse offset and time indexes), `segment` (one `.log` with its indexes, and the batch walk used by recovery),
`leader_epoch` (the leader epoch cache), `log` (one partition's log) and `log_manager` (every log of a log dir).
"""
