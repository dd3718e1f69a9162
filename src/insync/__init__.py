"""insync: a Kafka-compatible replicated commit log, faithful to Kafka's in-sync replica protocol."""

__version__ = "0.1.0"
