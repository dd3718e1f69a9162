"""Kafka wire formats without I/O: record-batch views, validation, builders and codecs."""
