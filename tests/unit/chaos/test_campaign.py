"""The campaign's pure parts: schedules from seeds, the fault-kind registry, the report and the table."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from insync import waiting
from insync.chaos import campaign, checker, cluster, nemesis, report
from insync.chaos.ops import HistoryWriter, Op, read_history
from insync.config import ConfigError


def test_a_seed_replays_its_schedule_and_run_r_is_seed_plus_r() -> None:
    plans = campaign.plan_campaign(3, 40, 60.0, tuple(nemesis.KINDS))
    assert [p.seed for p in plans] == [40, 41, 42]
    assert campaign.plan_run(0, 41, 60.0, tuple(nemesis.KINDS)).faults == plans[1].faults
    assert plans[0].faults != plans[1].faults


@pytest.mark.parametrize("seed", [0, 1, 5, 99])
def test_a_schedule_is_one_fault_at_a_time_inside_the_run(seed: int) -> None:
    kinds = tuple(nemesis.KINDS)
    plan = campaign.plan_run(0, seed, 60.0, kinds)
    assert plan.faults[0].kind == kinds[seed % len(kinds)]
    assert plan.faults[0].at_s == campaign.WARMUP_S
    for before, after in zip(plan.faults, plan.faults[1:], strict=False):
        assert after.at_s >= before.at_s + before.hold_s + campaign.GAP_S[0] - 0.1
    last = plan.faults[-1]
    assert last.at_s + last.hold_s <= 60.0 - campaign.COOLDOWN_S
    first_round = [f.kind for f in plan.faults[:len(kinds)]]
    assert len(plan.faults) >= len(kinds) and sorted(first_round) == sorted(kinds)  # each kind once, then repeats


def test_consecutive_seeds_start_with_every_kind_in_turn() -> None:
    kinds = ("kill", "pause")
    assert [p.faults[0].kind for p in campaign.plan_campaign(4, 0, 30.0, kinds)] == ["kill", "pause"] * 2
    assert campaign.plan_run(0, 0, campaign.WARMUP_S + campaign.COOLDOWN_S, kinds).faults == ()


def test_fault_kinds_are_checked_against_the_registry() -> None:
    assert nemesis.parse_kinds("kill, pause,kill") == ("kill", "pause")
    assert nemesis.parse_kinds("all") == tuple(nemesis.KINDS)
    with pytest.raises(ConfigError, match="unknown fault kind flood; known: pause, kill"):
        nemesis.parse_kinds("kill,flood")
    with pytest.raises(ConfigError, match="names no fault kind"):
        nemesis.parse_kinds(" , ")
    assert {k: v.overrides for k, v in nemesis.KINDS.items() if v.overrides} == {
        "slow-reads": nemesis.INJECTION, "fail-partition": nemesis.INJECTION, "delay": nemesis.INJECTION,
        "power-loss": ("fault.injection.power.loss.enable=true",)}


def history() -> list[Op]:
    return [Op(0, "nemesis", "info", "start", fault="kill broker 2"),
            Op(100, "p0", "invoke", "send", value="p0-0", label="acks=all,idempotent"),
            Op(350, "p0", "ok", "send", value="p0-0", partition=0, offset=0),
            Op(1200, "p2", "invoke", "send", value="p2-0", label="acks=1"),
            Op(1300, "p2", "ok", "send", value="p2-0", partition=0, offset=1),
            Op(2000, "nemesis", "info", "stop", fault="kill broker 2"),
            Op(2500, "final", "ok", "poll", records=((0, 0, "p0-0"),)),
            Op(2600, "final", "ok", "complete-read", partition=0, offset=1)]


def test_the_report_shows_the_series_the_verdict_and_the_anomalies(tmp_path: Path) -> None:
    ops = history()
    assert report.series(ops) == [{"second": 0, "acked": 1, "latency_max_ms": 250.0},
                                  {"second": 1, "acked": 1, "latency_max_ms": 100.0}]
    plan = campaign.RunPlan(0, 7, 30.0, (campaign.Planned(3.0, "kill", 2.0, 5),))
    result = campaign.RunResult(plan, checker.check(ops), str(tmp_path), 12.0)
    report.write(tmp_path, result.to_json(ops))
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["ok"] and data["anomalies"]["lost-write"] == 1 and data["anomalies_by_label"] == \
        {"acks=1": {"lost-write": 1}}
    assert data["examples"][0]["faults"] == ["kill broker 2"] and data["schedule"][0]["kind"] == "kill"
    assert data["examples"][0]["forbidden"] is False
    page = (tmp_path / "report.html").read_text()
    assert "Run 0 (seed 7): OK" in page and "kill broker 2" in page and "<svg" in page and "lost-write" in page


def test_the_table_has_a_line_per_run_and_totals() -> None:
    check = checker.check(history())
    lines = report.table([(0, 7, check, None), (1, 8, check, "TimeoutError: node 2 not listening")])
    assert len(lines) == 4 and lines[1].split()[:4] == ["0", "7", "1", "2"] and lines[1].endswith("  ok")
    assert lines[2].endswith("ERROR TimeoutError: node 2 not listening")
    assert lines[-1].split()[:3] == ["all", "2", "4"] and lines[-1].endswith("1 ok, 1 not")


@pytest.mark.parametrize(("args", "message"), [
    (["--faults", "flood"], "unknown fault kind flood"),
    (["--runs", "0"], "--runs must be at least 1"),
    (["--duration", "5"], "--duration over 9 s"),
    (["--concurrent-faults", "4"], "--concurrent-faults must be 1 to 3, got 4"),
    (["--zookeeper", "--faults", "kill,isolate,ring"], "isolate, ring need a cluster in network namespaces"),
])
def test_campaign_arguments_are_checked_before_anything_starts(tmp_path: Path, args: list[str], message: str) -> None:
    out = subprocess.run([sys.executable, "-m", "insync.cli.main", "chaos", "campaign", "--out", str(tmp_path / "o"),
                          *args], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and message in out.stderr and not (tmp_path / "o").exists()


def test_the_campaign_summary_totals_the_runs() -> None:
    plan = campaign.RunPlan(0, 7, 30.0, ())
    result = campaign.RunResult(plan, checker.check(history()), "/tmp/run-0", 12.0)
    data = campaign.summary([result, result], 30.0)
    assert (data["runs"], data["ok_runs"], data["forbidden"], data["faults"], data["acked"]) == (2, 2, 0, 2, 4)
    assert data["anomalies"]["lost-write"] == 2 and data["anomalies_by_label"] == {"acks=1": {"lost-write": 2}}
    assert data["per_run"][1] == {"run": 0, "seed": 7, "ok": True, "error": None, "elapsed_s": 12.0,
                                  "faults": ["kill broker 2"], "skipped": [],
                                  "anomalies": result.check.counts, "transactions": {}}


def test_chaos_check_reads_a_history_again(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    ops = [*history()[:3], Op(400, "c0", "ok", "poll", records=((0, 0, "p0-0"),)),
           Op(500, "c0", "ok", "poll", records=((0, 0, "p0-0"),))]
    path.write_text("".join(op.to_json() + "\n" for op in ops))
    command = [sys.executable, "-m", "insync.cli.main", "chaos", "check", str(path)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "FORBIDDEN nonmonotonic-poll c0 polled 0:0 then 0:0" in out.stdout
    assert "kill broker 2" in out.stdout and out.stdout.rstrip().endswith("1 forbidden anomalies")
    data = json.loads(subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=60).stdout)
    assert data["forbidden"] == 1 and data["anomalies"]["nonmonotonic-poll"] == 1
    path.write_text('{"time_ms": 0}\n')
    out = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "history.jsonl:1: not a history operation" in out.stderr


class FakeAdmin:
    """list_topics answers from a script of partition maps, the last one repeated."""

    def __init__(self, answers: list[dict[int, object]]) -> None:
        self.answers = answers

    def list_topics(self, topic: str, timeout: float) -> object:
        partitions = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return SimpleNamespace(topics={topic: SimpleNamespace(partitions=partitions, error="LEADER_NOT_AVAILABLE")})


def test_a_victim_is_chosen_once_the_metadata_has_the_partitions(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    target = nemesis.Target(cluster.layout(tmp_path, brokers=3, port=0), "t")
    monkeypatch.setattr(waiting.time, "sleep", lambda _s: None)
    ready = {p: SimpleNamespace(leader=p + 1, replicas=[p + 1, 3]) for p in range(3)}
    no_leader = {p: SimpleNamespace(leader=-1, replicas=[1, 2]) for p in range(3)}
    monkeypatch.setattr(nemesis, "admin_client", lambda _b: FakeAdmin([{}, no_leader, ready]))
    assert target.replicas(4) == (1, 2, (2, 3))
    monkeypatch.setattr(nemesis, "METADATA_WAIT_S", 0.0)
    monkeypatch.setattr(nemesis, "admin_client", lambda _b: FakeAdmin([{}]))
    with pytest.raises(ConfigError, match="no partitions of t in the metadata after 0 s: LEADER_NOT_AVAILABLE"):
        target.replicas(0)


def test_a_harness_failure_fails_its_run_and_the_campaign_goes_on(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(plan: campaign.RunPlan, _directory: Path, history: HistoryWriter, _rate: float) -> tuple[str, ...]:
        history.append("nemesis", "info", "start", fault="kill broker 1")
        if plan.run == 0:
            raise TimeoutError("node 1 not listening")
        return ()

    monkeypatch.setattr(campaign, "_under_faults", failing)
    results = campaign.run_campaign(campaign.plan_campaign(2, 0, 30.0, ("kill",)), tmp_path)
    assert [(r.ok, r.error) for r in results] == [(False, "TimeoutError: node 1 not listening"), (True, None)]
    assert [fault for fault, _, _ in results[0].check.faults] == ["kill broker 1"]  # its history still checked
    assert "harness error: TimeoutError" in (tmp_path / "run-0" / "report.html").read_text()
    page = (tmp_path / "index.html").read_text()
    assert "1 of 2 runs ok" in page and "<a href='run-1/report.html'>1</a>" in page and "node 1 not listening" in page
    totals = json.loads((tmp_path / "campaign.json").read_text())
    assert (totals["runs"], totals["ok_runs"], totals["per_run"][0]["error"]) == \
        (2, 1, "TimeoutError: node 1 not listening")


def test_a_run_directory_of_an_earlier_campaign_is_refused_before_anything_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "run-1" / "cluster" / "node-1").mkdir(parents=True)  # its old logs would be the new cluster's
    started: list[int] = []
    monkeypatch.setattr(campaign, "_under_faults", lambda plan, *_: started.append(plan.run) or ())
    with pytest.raises(ConfigError, match=r"already holds .*run-1 from an earlier campaign"):
        campaign.run_campaign(campaign.plan_campaign(2, 0, 30.0, ("kill",)), tmp_path)
    assert started == [] and not (tmp_path / "run-0").exists() and not (tmp_path / "campaign.json").exists()


def test_concurrent_lanes_overlap_their_faults() -> None:
    kinds = tuple(nemesis.KINDS)
    assert campaign.plan_run(0, 3, 60.0, kinds, 1) == campaign.plan_run(0, 3, 60.0, kinds)
    plan = campaign.plan_run(0, 3, 60.0, kinds, 2)
    assert [f.at_s for f in plan.faults] == sorted(f.at_s for f in plan.faults)
    assert len(plan.faults) > len(campaign.plan_run(0, 3, 60.0, kinds).faults)
    overlapping = [(a, b) for a, b in zip(plan.faults, plan.faults[1:], strict=False) if b.at_s < a.at_s + a.hold_s]
    assert overlapping and all(f.at_s + f.hold_s <= 60.0 - campaign.COOLDOWN_S for f in plan.faults)


def test_play_starts_and_undoes_overlapping_faults_in_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def kind(name: str) -> nemesis.FaultKind:
        def start(_target: nemesis.Target, pick: int) -> nemesis.Active:
            if name == "broken":
                raise ConfigError("no leader")
            calls.append(f"start {name}")
            return nemesis.Active(f"{name} {pick}", lambda _t: calls.append(f"undo {name}"))
        return nemesis.FaultKind(name, start)

    monkeypatch.setattr(nemesis, "REGISTRY", {n: kind(n) for n in ("a", "b", "broken")})
    plan = campaign.RunPlan(0, 1, 1.5, (campaign.Planned(0.0, "a", 1.0, 1), campaign.Planned(0.25, "b", 0.25, 2),
                                        campaign.Planned(0.35, "broken", 0.1, 3),
                                        campaign.Planned(0.75, "b", 5.0, 4)))  # 0.25 s apart: a loaded machine
    history = HistoryWriter(tmp_path / "h.jsonl")
    campaign._play(plan, nemesis.Target(cluster.layout(tmp_path, brokers=1, port=0), "t"), history)
    history.close()
    assert calls == ["start a", "start b", "undo b", "start b", "undo a", "undo b"]  # the last one cut at the end
    ops = [(op.type, op.f, op.fault) for op in read_history(tmp_path / "h.jsonl")]
    assert ("fail", "start", "broken") in ops and ops[-1] == ("info", "stop", "b 4")


def test_heal_skips_a_resume_of_a_node_that_is_not_running(tmp_path: Path) -> None:
    target = nemesis.Target(cluster.layout(tmp_path, brokers=1, port=0), "t")
    target.heal("resume", 1)  # killed meanwhile by an overlapping fault: nothing to resume, no error
    assert target.spec.node(1).pid is None


def test_a_kafka_campaign_plans_insyncs_schedule_and_skips_what_only_insync_nodes_inject() -> None:
    kinds = nemesis.parse_kinds("all")
    assert {"slow-reads", "fail-partition", "delay", "power-loss", "kill"} <= set(kinds)
    on_kafka = campaign.plan_campaign(3, 7, 60.0, kinds, 2, engine="kafka:4.1.2")
    on_insync = campaign.plan_campaign(3, 7, 60.0, kinds, 2)
    assert [p.faults for p in on_kafka] == [p.faults for p in on_insync]
    assert {p.engine for p in on_kafka} == {"kafka:4.1.2"}
    slow = next(p for p in on_kafka if any(f.kind == "slow-reads" for f in p.faults))
    assert "fault.injection.enable=true" in campaign.node_overrides(replace(slow, engine="insync"))
    assert campaign.node_overrides(slow) == list(campaign.OVERRIDES)
    with pytest.raises(ConfigError, match="--engine kafka:3.9"):
        campaign.plan_campaign(1, 7, 30.0, ("kill",), zookeeper=True, engine="kafka:4.1.2")


def test_play_on_kafka_records_the_insync_only_kinds_as_skipped(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def start(_target: nemesis.Target, pick: int) -> nemesis.Active:
        calls.append(f"start {pick}")
        return nemesis.Active(f"kill {pick}", lambda _t: calls.append(f"undo {pick}"))

    monkeypatch.setattr(nemesis, "REGISTRY", {"kill": nemesis.FaultKind("kill", start),
                                              "delay": nemesis.FaultKind("delay", start, insync_only=True)})
    plan = campaign.RunPlan(0, 1, 0.6, (campaign.Planned(0.0, "delay", 0.2, 1), campaign.Planned(0.1, "kill", 0.2, 2)),
                            engine="kafka:4.1.2")
    spec = replace(cluster.layout(tmp_path, brokers=1, port=0), engine="kafka:4.1.2")
    history = HistoryWriter(tmp_path / "h.jsonl")
    campaign._play(plan, nemesis.Target(spec, "t"), history)
    history.close()
    assert calls == ["start 2", "undo 2"]
    ops = [(op.f, op.fault) for op in read_history(tmp_path / "h.jsonl")]
    assert ops == [("skip", "delay"), ("start", "kill 2"), ("stop", "kill 2")]

    def under_faults(_plan: campaign.RunPlan, _directory: Path, history: HistoryWriter, _rate: float) -> tuple[()]:
        history.append("nemesis", "info", "skip", fault="delay", error="injected by an insync node itself")
        return ()

    monkeypatch.setattr(campaign, "_under_faults", under_faults)
    [result] = campaign.run_campaign([plan], tmp_path / "campaign")
    assert result.skipped == ("delay",) and result.ok and not result.check.faults
    totals = json.loads((tmp_path / "campaign" / "campaign.json").read_text())
    assert (totals["skipped"], totals["per_run"][0]["skipped"]) == (1, ["delay"])
    assert "1 more skipped" in (tmp_path / "campaign" / "index.html").read_text()


def test_the_log_dir_kinds_are_opt_in_and_each_needs_a_campaign_of_its_own() -> None:
    assert "disk-full" not in campaign.nemesis.KINDS and "disk-error" not in nemesis.parse_kinds("all")
    with pytest.raises(ConfigError, match="disk-full and disk-error each put the log dirs on a file system"):
        campaign.plan_campaign(1, 0, 30.0, ("disk-full", "disk-error"))
    [on_kafka] = campaign.plan_campaign(1, 0, 30.0, ("kill", "disk-full"), engine="kafka:4.1.2")  # from outside too
    assert {f.kind for f in on_kafka.faults} == {"kill", "disk-full"}
    [plan] = campaign.plan_campaign(1, 0, 30.0, ("kill", "disk-full"))
    assert {f.kind for f in plan.faults} == {"kill", "disk-full"}
