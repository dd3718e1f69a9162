"""Wrong arguments and bad configuration give one line naming the problem and a non-zero exit, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from insync.cli.main import main


@pytest.mark.parametrize(("argv", "message"), [
    (["broker", "start", "--config", "foo=bar"], "unknown broker config key: foo"),
    (["broker", "start", "--config", "replica.lag.time.max.ms=-5"],
     "Invalid value -5 for configuration replica.lag.time.max.ms: Value must be at least 1"),
    (["broker", "start", "--config", "/nonexistent/server.properties"], "No such file or directory"),
    (["broker", "start", "--config", "a.properties", "--config", "b.properties"], "at most one properties file"),
    (["sim", "run", "nosuch"], "unknown scenario 'nosuch'"),
    (["cluster", "status", "--dir", "/nonexistent/cluster"], "no cluster at /nonexistent/cluster"),
    (["cluster", "up", "--brokers", "0", "--dir", "/tmp/insync-never"], "--brokers must be at least 1"),
    (["bench", "storage", "--seconds", "0"], "--seconds and --fetch-bytes must be positive"),
    (["bench", "spark-source", "--bootstrap-server", "127.0.0.1:9", "--rounds", "0"], "--rounds 1 to 20"),
    (["bench", "compare", "--peer", "kafka", "--only", "latency,scales"],
     "--only takes throughput, latency, requests, java, e2e-tool, connections, compaction, scale, not scales"),
    (["bench", "compare", "--peer", "kafka", "--compaction-mb", "0"], "--compaction-mb takes a size in MB, 1 or more"),
    (["bench", "compare", "--peer", "kafka", "--scale", "0"], "--scale takes a number of partitions, 1 or more"),
    (["configs", "--entity-type", "brokers", "--entity-name", "one", "--describe"],
     "--entity-name must be a broker id, got 'one'"),
    (["configs", "--entity-type", "brokers", "--entity-default", "--alter"],
     "--alter needs --add-config or --delete-config"),
    (["configs", "--entity-type", "brokers", "--entity-default", "--alter", "--all", "--delete-config", "a"],
     "--all goes with --describe"),
    (["configs", "--entity-type", "brokers", "--entity-default", "--describe", "--delete-config", "a"],
     "--add-config and --delete-config go with --alter"),
    (["configs", "--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "novalue"],
     "--add-config expects k=v pairs separated by commas, got 'novalue'"),
    (["configs", "--bootstrap-server", "127.0.0.1:9", "--entity-type", "brokers", "--entity-default", "--describe"],
     "Connection refused"),
])
def test_operating_errors_are_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("insync: error: ") and message in err and "Traceback" not in err


def test_unknown_scenario_override_and_chaos_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "run", "stuck-follower", "--set", "broker.replica.lag.time.max.msx=1"]) == 1
    assert "replica.lag.time.max.msx" in capsys.readouterr().err
    script = tmp_path / "s.toml"
    script.write_text('[[step]]\nat_s = 1\naction = "explode"\nbroker = 1\n')
    assert main(["chaos", "run", str(script), "--dir", str(tmp_path)]) == 1
    assert "action must be one of" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["topics"], ["chaos", "slow-reads", "1", "--dir", "d"], ["nosuch"], ["sim", "run"],
                                  ["configs", "--entity-type", "topics", "--entity-default", "--describe"],
                                  ["configs", "--entity-type", "brokers", "--describe"]])
def test_wrong_arguments_exit_2_with_usage(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2


def test_configs_prints_the_error_a_broker_answers(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from insync import admin_requests, errors

    monkeypatch.setattr(admin_requests, "describe_broker_configs",
                        lambda *_: (errors.INVALID_REQUEST, "Unexpected broker id", []))
    assert main(["configs", "--entity-type", "brokers", "--entity-default", "--describe"]) == 1
    assert capsys.readouterr().err == "Error: INVALID_REQUEST: Unexpected broker id\n"
