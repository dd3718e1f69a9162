"""Replication, sans-IO: the leader's and the follower's halves of one partition, the ISR and its policy,
the purgatory of delayed produces and fetches, and the fetcher sessions that copy partitions between brokers.

Nothing here opens a socket, sleeps or reads a clock: time is a `now_ms` argument, the log is reached through
the `LogView` protocol, and every state change worth reporting becomes an `insync.events.Event` in an
`EventBuffer` that the driver (server or simulator) drains.
"""
