"""`insync produce` and `insync consume`: console tools like kafka-console-producer/-consumer.

`produce` sends each stdin line as one record (`--key-separator` splits key and value) with the chosen acks
and reports what was not acknowledged. `consume` assigns partitions directly, starts at `--offset` (earliest,
latest or a number), prints each record, and stops after `--max-messages` or when nothing arrives for
`--idle-timeout-ms`. With `--group` it joins that consumer group instead: it subscribes, starts where the group
committed (`--offset` earliest or latest where it has not), and commits what it printed before it leaves.
Consumers only ever see committed data (below the high watermark).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from insync import command_config
from insync.config import ConfigError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
FLUSH_TIMEOUT_S = 30.0
METADATA_TIMEOUT_S = 15.0
POLL_S = 0.2


def register(subparsers: Any) -> None:
    produce = subparsers.add_parser("produce", help="stdin lines to a topic")
    produce.add_argument("--topic", required=True)
    produce.add_argument("--acks", default="all", choices=["0", "1", "all", "-1"])
    produce.add_argument("--key-separator", default=None, help="split each line into key and value")
    produce.add_argument("--partition", type=int, default=None)
    produce.set_defaults(func=_produce)

    consume = subparsers.add_parser("consume", help="a topic to stdout")
    consume.add_argument("--topic", required=True)
    consume.add_argument("--partition", type=int, action="append", default=None, help="repeatable; default all")
    consume.add_argument("--offset", default="earliest", help="earliest, latest or an offset")
    consume.add_argument("--max-messages", type=int, default=None)
    consume.add_argument("--idle-timeout-ms", type=int, default=5000)
    consume.add_argument("--print-key", action="store_true")
    consume.add_argument("--print-offset", action="store_true")
    consume.add_argument("--group", default=None, help="join this consumer group and commit what was printed")
    consume.set_defaults(func=_consume)

    for sub in (produce, consume):
        sub.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP)


def _produce(args: argparse.Namespace, stdin: TextIO | None = None) -> int:
    from confluent_kafka import Producer

    producer = Producer(command_config.confluent({
        "bootstrap.servers": args.bootstrap_server, "acks": args.acks,
        "enable.idempotence": args.acks in ("all", "-1"), "linger.ms": 5}))
    failures: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(err.str())

    sent = 0
    for line in stdin or sys.stdin:
        text = line.rstrip("\n")
        key: str | None = None
        if args.key_separator is not None and args.key_separator in text:
            key, text = text.split(args.key_separator, 1)
        kwargs: dict[str, Any] = {"key": key, "value": text, "on_delivery": delivered}
        if args.partition is not None:
            kwargs["partition"] = args.partition
        producer.produce(args.topic, **kwargs)
        producer.poll(0)
        sent += 1
    left = producer.flush(FLUSH_TIMEOUT_S)
    if failures or left:
        print(f"{len(failures) + left} of {sent} records not acknowledged"
              f"{': ' + failures[0] if failures else ' (flush timed out)'}", file=sys.stderr)
        return 1
    return 0


def _start_offset(text: str) -> int:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END

    if text == "earliest":
        return int(OFFSET_BEGINNING)
    if text == "latest":
        return int(OFFSET_END)
    try:
        offset = int(text)
    except ValueError:
        raise ConfigError(f"--offset must be earliest, latest or a number, got {text!r}") from None
    if offset < 0:
        raise ConfigError(f"--offset must not be negative, got {offset}")
    return offset


def _consume(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, TopicPartition

    if args.group is not None:
        return _consume_in_group(args)
    start = _start_offset(args.offset)
    consumer = Consumer(command_config.confluent({
        "bootstrap.servers": args.bootstrap_server, "group.id": "insync-console",
        "enable.auto.commit": False, "enable.partition.eof": False}))
    try:
        metadata = consumer.list_topics(args.topic, timeout=METADATA_TIMEOUT_S).topics.get(args.topic)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            raise ConfigError(f"unknown topic: {args.topic}")
        partitions = args.partition or sorted(metadata.partitions)
        missing = [p for p in partitions if p not in metadata.partitions]
        if missing:
            raise ConfigError(f"topic {args.topic} has no partition {missing[0]}")
        consumer.assign([TopicPartition(args.topic, p, start) for p in partitions])
        return _print_records(consumer, args)
    finally:
        consumer.close()


def _consume_in_group(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer

    if args.partition is not None:
        raise ConfigError("--partition cannot be used with --group: the group assigns the partitions")
    if args.offset not in ("earliest", "latest"):
        raise ConfigError(f"--offset {args.offset} cannot be used with --group: the group starts where it committed "
                          "(earliest or latest where it has not)")
    consumer = Consumer(command_config.confluent({
        "bootstrap.servers": args.bootstrap_server, "group.id": args.group,
        "auto.offset.reset": args.offset, "enable.auto.commit": False, "enable.partition.eof": False}))
    try:
        consumer.subscribe([args.topic])
        code = _print_records(consumer, args)
        if consumer.assignment():
            consumer.commit(asynchronous=False)  # the positions after what was printed
        return code
    finally:
        consumer.close()


def _print_records(consumer: Any, args: argparse.Namespace) -> int:
    printed = 0
    idle_deadline = time.monotonic() + args.idle_timeout_ms / 1000
    while args.max_messages is None or printed < args.max_messages:
        if time.monotonic() > idle_deadline:
            break
        message = consumer.poll(POLL_S)
        if message is None:
            continue
        if message.error() is not None:
            print(f"error: {message.error().str()}", file=sys.stderr)
            return 1
        idle_deadline = time.monotonic() + args.idle_timeout_ms / 1000
        parts = []
        if args.print_offset:
            parts.append(f"{message.partition()}:{message.offset()}")
        if args.print_key:
            key = message.key()
            parts.append(key.decode(errors="replace") if key is not None else "null")
        value = message.value()
        parts.append(value.decode(errors="replace") if value is not None else "null")
        print("\t".join(parts))
        printed += 1
    return 0
