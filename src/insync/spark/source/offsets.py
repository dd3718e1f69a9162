"""Offsets as Spark's Kafka source writes them (`{"topic": {"partition": next_offset}}`) and where a query starts.

Topics and partitions are in sorted order, so equal positions are equal JSON strings: Spark compares them that
way to see whether anything is new.
"""

from __future__ import annotations

from collections.abc import Mapping

from insync.spark.source.kafka_io import Metadata
from insync.spark.source.options import SourceOptions
from insync.types import TopicPartition

OffsetsJson = dict[str, dict[str, int]]


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> OffsetsJson:
    """Spark's Kafka offsets JSON in canonical order: topics by name, partitions by number."""
    result: OffsetsJson = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return result


def offsets_from_json(offsets: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {TopicPartition(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}


def start_offsets(md: Metadata, tps: list[TopicPartition], options: SourceOptions,
                   streaming: bool) -> dict[TopicPartition, int]:
    if options.starting_timestamp_ms is not None:
        return md.for_timestamp(tps, options.starting_timestamp_ms)
    spec = options.starting_offsets
    if spec == "earliest":
        return md.earliest(tps)
    if spec == "latest":
        assert streaming, "parse_source_options rejects startingOffsets=latest for batch queries"
        return md.latest(tps)
    assert isinstance(spec, dict)
    return specific_offsets(md, tps, spec, "startingOffsets")


def specific_offsets(md: Metadata, tps: list[TopicPartition], spec: Mapping[TopicPartition, int],
                      option: str) -> dict[TopicPartition, int]:
    """Resolve a JSON offsets option: it must name exactly the subscribed partitions; -2 earliest, -1 latest."""
    missing = sorted(set(tps) - set(spec))
    extra = sorted(set(spec) - set(tps))
    if missing or extra:
        raise ValueError(f"{option} must give an offset for every subscribed partition and no others: "
                         f"missing {[str(tp) for tp in missing]}, not subscribed {[str(tp) for tp in extra]}")
    earliest = md.earliest([tp for tp, o in spec.items() if o == -2])
    latest = md.latest([tp for tp, o in spec.items() if o == -1])
    return {tp: earliest.get(tp, latest.get(tp, o)) for tp, o in spec.items()}
