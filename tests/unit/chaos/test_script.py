from pathlib import Path

import pytest

from insync import faults
from insync.chaos import cluster, history, script
from insync.config import ConfigError


def test_script_parses_and_sorts_steps(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('rate = 50\nduration_s = 10\n[[step]]\nat_s = 5\naction = "resume"\nbroker = 2\n'
                    '[[step]]\nat_s = 1\naction = "slow-reads"\nbroker = 1\ntopic = "t"\npartition = 0\nms = 25000\n')
    plan = script.load_script(path)
    assert plan.rate == 50 and [s.action for s in plan.steps] == ["slow-reads", "resume"]
    assert plan.steps[0] == script.Step(1.0, "slow-reads", 1, "t", 0, 25000)


@pytest.mark.parametrize(("text", "message"), [
    ('[[step]]\nat_s = 1\naction = "explode"\nbroker = 1\n', "action must be one of"),
    ('[[step]]\nat_s = 1\naction = "slow-reads"\nbroker = 1\ntopic = "t"\npartition = 0\n', "needs ms"),
    ('[[step]]\nat_s = 1\naction = "pause"\nbroker = 1\ncolour = 2\n', "unknown field colour"),
    ('speed = 3\n', "unknown key speed"),
    ('rate = \n', "s.toml"),
])
def test_bad_scripts_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        script.load_script(path)


def test_faults_file_is_refused_without_fault_injection(tmp_path: Path) -> None:
    spec = cluster.layout(tmp_path, brokers=2, port=0)
    node = spec.node(1)
    with pytest.raises(ConfigError, match="fault.injection.enable=true"):
        script.apply(spec, script.Step(0, "fail-partition", 1, "t", 0))
    assert faults.read_faults(node.directory) == faults.FaultSpec()

    enabled = cluster.layout(tmp_path / "b", brokers=2, port=0, overrides=["fault.injection.enable=true"])
    script.apply(enabled, script.Step(0, "slow-reads", 1, "t", 0, 25000))
    script.apply(enabled, script.Step(0, "fail-partition", 1, "t", 3))
    script.apply(enabled, script.Step(0, "delay", 1, ms=40))
    assert faults.read_faults(enabled.node(1).directory) == faults.FaultSpec({"t-0": 25000}, ("t-3",), 40)
    script.apply(enabled, script.Step(0, "clear", 1))
    assert faults.read_faults(enabled.node(1).directory) == faults.FaultSpec()
    with pytest.raises(ConfigError, match="not running"):
        script.apply(enabled, script.Step(0, "pause", 1))


def test_layout_validates_overrides_and_ports(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="replica.lag.time.max.msx"):
        cluster.layout(tmp_path, brokers=3, port=0, overrides=["replica.lag.time.max.msx=5"])
    with pytest.raises(ConfigError, match="--brokers"):
        cluster.layout(tmp_path, brokers=0, port=9092)
    spec = cluster.layout(tmp_path, brokers=3, port=9092)
    assert [n.port for n in spec.brokers] == [9092, 9093, 9094] and spec.controller.port == 9095
    assert cluster.ClusterSpec.load(tmp_path) == spec
    text = spec.node(2).config_path.read_text()
    assert "node.id=2\n" in text and "controller.quorum.voters=0@127.0.0.1:9095\n" in text


def test_verdict_counts_lost_duplicated_reordered() -> None:
    produced = history.ProduceHistory(acked=[(0, 0, 0), (0, 1, 1), (1, 0, 2), (1, 1, 3)], sent=5)
    assert history.verdict(produced, {0: [0, 1], 1: [2, 3]}).ok
    bad = history.verdict(produced, {0: [1, 0, 0], 1: [2]})
    assert (bad.lost, bad.duplicated, bad.reordered, bad.lost_examples) == (1, 1, 1, (3,))
    assert history.decode_value("r", history.encode_value("r", 42, 100)) == 42
    assert history.decode_value("r", history.encode_value("other", 42, 100)) is None


def test_several_controllers_need_zookeeper_and_are_all_voters(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--controllers 2 needs metadata.store=zookeeper"):
        cluster.layout(tmp_path / "a", brokers=1, port=0, controllers=2)
    with pytest.raises(ConfigError, match="--controllers must be at least 1"):
        cluster.layout(tmp_path / "b", brokers=1, port=0, controllers=0)
    spec = cluster.layout(tmp_path / "c", brokers=2, port=9092, controllers=2,
                          overrides=["metadata.store=zookeeper", "zookeeper.connect=127.0.0.1:2181/x"])
    assert [c.node_id for c in spec.controllers] == [0, 1001] and [b.node_id for b in spec.brokers] == [1, 2]
    assert [c.port for c in spec.controllers] == [9094, 9095]
    voters = "controller.quorum.voters=0@127.0.0.1:9094,1001@127.0.0.1:9095"
    assert all(voters in n.config_path.read_text().splitlines() for n in spec.nodes)
    assert "offsets.topic.replication.factor=2" in spec.node(1).config_path.read_text().splitlines()
