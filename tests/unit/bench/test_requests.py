"""`insync bench requests`: the request frame it resends, and how py-spy samples are sorted."""

from __future__ import annotations

from insync.bench import requests
from insync.protocol.codec import decode_request
from insync.wire.versions import BROKER_API_VERSIONS, PRODUCE

LOOP = "BaseEventLoop._run_once (asyncio/base_events.py:1922);Handle._run (asyncio/events.py:80)"


def test_produce_frame_is_one_record_at_the_asked_acks() -> None:
    for acks in (1, -1):
        frame = requests.produce_frame("orders", acks, record_bytes=10)
        request = decode_request(frame[4:], BROKER_API_VERSIONS)
        assert (request.api_key, request.api_version, request.correlation_id) == (PRODUCE, 9, 0)
        assert request.body.acks == acks
        [topic] = request.body.topic_data
        [data] = topic.partition_data
        assert (topic.name, data.index) == ("orders", 0)


def test_produce_frame_names_the_partition_asked_for() -> None:
    request = decode_request(requests.produce_frame("orders", -1, record_bytes=10, partition=7)[4:],
                             BROKER_API_VERSIONS)
    assert [data.index for topic in request.body.topic_data for data in topic.partition_data] == [7]


def test_samples_sorted_by_where_the_time_went() -> None:
    lines = [
        f"{LOOP};BrokerNode._call (insync/server/broker_node.py:160);BrokerCore.handle (core.py:149) 5",
        f"{LOOP};BrokerNode._fetch (insync/server/broker_node.py:330);encode_response (insync/wire/fetch.py:160);"
        "build (insync/protocol/kio.py:59);__init__ (<string>:3) 4",
        f"{LOOP};Listener._start (insync/server/listener.py:160);decode_request (insync/protocol/codec.py:99);"
        "read (kio/serial/readers.py:10) 3",
        f"{LOOP};_SelectorSocketTransport.write (asyncio/selector_events.py:1069) 2",
        "BaseEventLoop._run_once (asyncio/base_events.py:1922);EpollSelector.select (selectors.py:468) 7",
        f"{LOOP};Task.__step (asyncio/tasks.py:267) 1",
        f"{LOOP};MeteredDispatcher.handle (insync/server/role.py:44) 6",
        "Thread._bootstrap (threading.py:1002);BaseServer.serve_forever (socketserver.py:233);"
        "_PollLikeSelector.select (selectors.py:415) 50",
        "garbage line",
    ]
    assert requests.breakdown(lines) == {"decode": 3, "core": 5, "encode": 4, "asyncio": 1, "syscalls": 2,
                                         "poll": 7, "other": 6}
