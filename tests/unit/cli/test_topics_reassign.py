"""`insync topics reassign`'s pure parts, as kafka-reassign-partitions.sh has them: Kafka's JSON files parsed and
checked with its words, its compact JSON out, --generate's proposal, and the --verify and --list lines."""

from __future__ import annotations

import random

import pytest

from insync.admin_requests import Reassignment
from insync.cli.main import main
from insync.cli.topics_reassign import (
    list_lines,
    moves,
    parse_broker_list,
    parse_reassignment,
    parse_topics,
    propose,
    reassignment_json,
    throttled_replicas,
    verify_lines,
)
from insync.config import ConfigError

PLAN = ('{"version":1,"partitions":[{"topic":"t","partition":1,"replicas":[2,3,4],"log_dirs":["any","any","any"]},'
        '{"topic":"t","partition":0,"replicas":[1,2]}]}')


def test_a_plan_round_trips_in_kafkas_compact_json_sorted_by_partition() -> None:
    parsed = parse_reassignment(PLAN)
    assert parsed == {("t", 1): [2, 3, 4], ("t", 0): [1, 2]}
    assert reassignment_json(parsed) == (
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
        '{"topic":"t","partition":1,"replicas":[2,3,4],"log_dirs":["any","any","any"]}]}')


@pytest.mark.parametrize(("text", "message"), [
    ("{", "The input string is not a valid JSON"),
    ('{"version":2,"partitions":[]}', "Not supported version field value 2"),
    ('{"version":1,"partitions":[]}', "Partition reassignment list cannot be empty"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[]}]}', "Partition replica list cannot be empty"),
    ('{"partitions":[{"topic":"t","replicas":[1]}]}', r"partitions\[0\]: missing field 'partition'"),
    ('{"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}', "'partition' must be an int"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,"2"]}]}', "'replicas' must be a list of broker ids"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}',
     "Partition reassignment contains duplicate topic partitions: t-0"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,2,1]}]}',
     "Partition replica lists may not contain duplicate entries: t-0 contains multiple entries for 1"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}',
     r"Size of replicas list \[1, 2\] is different from size of log dirs list \['any'\] for partition t-0"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/data"]}]}',
     "log dirs other than \"any\" are not supported"),
])
def test_bad_plans_are_refused_naming_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_reassignment(text)


def test_topics_and_broker_lists_are_parsed_and_duplicates_refused() -> None:
    assert parse_topics('{"version":1,"topics":[{"topic":"a"},{"topic":"b"}]}') == ["a", "b"]
    with pytest.raises(ConfigError, match="List of topics to reassign contains duplicate entries: a"):
        parse_topics('{"topics":[{"topic":"a"},{"topic":"a"}]}')
    assert parse_broker_list("3,1,2") == [3, 1, 2]
    with pytest.raises(ConfigError, match="Broker list contains duplicate entries: 1"):
        parse_broker_list("1,2,1")
    with pytest.raises(ConfigError, match="not a comma-separated list of broker ids"):
        parse_broker_list("1,x")


def test_generate_places_each_topic_at_its_replication_factor_over_the_brokers_listed() -> None:
    current = {("a", 0): [1, 2], ("a", 1): [2, 3], ("b", 0): [1]}
    proposed = propose(current, [2, 3, 4], random.Random(5))
    assert set(proposed) == set(current)
    assert all(len(proposed[tp]) == len(current[tp]) and set(proposed[tp]) <= {2, 3, 4} for tp in current)
    with pytest.raises(ConfigError, match="Replication factor: 2 larger than available brokers: 1."):
        propose(current, [4], random.Random(5))


def test_verify_says_completed_in_progress_or_the_replica_set_found_instead() -> None:
    targets = {("t", 0): [2, 3], ("t", 1): [1, 2], ("t", 2): [4]}
    lines = verify_lines(targets, {("t", 1)}, {("t", 0): [2, 3], ("t", 1): [1, 2, 3], ("t", 2): [1]})
    assert lines == ["Status of partition reassignment:",
                     "Reassignment of partition t-0 is completed.",
                     "Reassignment of partition t-1 is still in progress.",
                     "There is no active reassignment of partition t-2, but replica set is 1 rather than 4."]


def test_list_shows_adding_and_removing_replicas_or_none_found() -> None:
    assert list_lines([]) == ["No partition reassignments found."]
    assert list_lines([Reassignment("t", 0, (2, 3, 4, 1), (4,), (1,)), Reassignment("a", 2, (1, 2), (), (2,))]) == [
        "Current partition reassignments:", "a-2: replicas: 1,2. removing: 2.",
        "t-0: replicas: 2,3,4,1. adding: 4. removing: 1."]


def test_an_action_without_its_file_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topics", "reassign", "--execute", "--bootstrap-server", "127.0.0.1:1"]) == 1
    assert "--execute needs --reassignment-json-file" in capsys.readouterr().err
    assert main(["topics", "reassign", "--generate", "--broker-list", "1", "--bootstrap-server", "127.0.0.1:1"]) == 1
    assert "--generate needs --topics-to-move-json-file" in capsys.readouterr().err


def test_throttle_lists_name_each_moving_partitions_sources_for_leaders_and_new_replicas_for_followers() -> None:
    running = [Reassignment("a", 1, (4, 1, 2), (4,), (2,))]  # 1,2 -> 1,4 in progress: sources 1,2
    planned = moves(running, {("t", 0): [2, 3, 4], ("t", 1): [1, 2]}, {("t", 0): [1, 2, 3], ("t", 1): [1, 2]})
    assert planned == {("a", 1): ({1, 2}, {4}), ("t", 0): ({1, 2, 3}, {4}), ("t", 1): ({1, 2}, set())}
    assert throttled_replicas(planned) == {
        "a": {"leader.replication.throttled.replicas": "1:1,1:2",
              "follower.replication.throttled.replicas": "1:4"},
        "t": {"leader.replication.throttled.replicas": "0:1,0:2,0:3,1:1,1:2",
              "follower.replication.throttled.replicas": "0:4"}}
