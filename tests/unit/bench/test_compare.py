"""`insync bench compare`'s table: each row both sides ran, with the ratio, the connection and scale rows too."""

from __future__ import annotations

from insync.bench import compare


def side(name: str, kb: float, p99: float, storm_s: float | None, leaders_s: float) -> dict[str, object]:
    return {"target": name,
            "connections-idle": {"kb_per_connection": kb, "slow_connects": 0},
            "connections-active": {"ack_p50_ms": 2.0, "ack_p99_ms": p99, "send_behind_ms_max": 1.0},
            "reconnect-storm": {"seconds": storm_s, "slow_connects": 3, "reconnects": 0},
            "scale": {"partitions": 100, "rss_mb_max": 80.0, "idle_cpu_percent_max": 2.0, "produce_ack_p50_ms": 3.0,
                      "produce_ack_p99_ms": 9.0, "killed_leaderships": 34, "leaders_after_kill_s": leaders_s,
                      "restart_to_isr_whole_s": 4.0, "shutdown_leaderships": 50, "controlled_shutdown_s": 1.0}}


def test_connection_and_scale_rows_show_both_sides_and_the_ratio() -> None:
    text = compare.table({"insync": side("insync RF3", 10.0, 5.0, 1.5, 6.0),
                          "peer": side("Kafka 4.1 RF3", 20.0, 4.0, None, 12.0)})
    rows = {line[:36].strip(): line[36:].split() for line in text.splitlines()[1:]}
    assert rows["idle connections: KB/connection"] == ["10.0", "20.0", "0.50"]
    assert rows["active producers: ack p50 ms"] == ["2.0", "2.0", "1.00"]
    assert rows["ack p99 ms"] == ["5.0", "4.0", "1.25"]
    assert rows["reconnect storm: all answered s"] == ["1.5", "-", "-"]  # the peer's storm never finished
    assert rows["all led again after the kill s"] == ["6.0", "12.0", "0.50"]
    assert rows["scale: partitions"] == ["100", "100", "1.00"]
    assert "produce MB/s (acks=all)" not in rows  # a row neither side ran is left out


def test_every_row_names_a_group_that_compare_runs() -> None:
    produced = {"produce", "consume", "consume-eager", "produce-one-node", "max-rate", "requests-acks-1",
                "requests-acks-all", "java-produce", "java-consume", "connections-idle", "connections-active",
                "reconnect-storm", "scale", *(name for name, _, _ in compare.LATENCY_RUNS)}
    assert {mode for _, mode, _ in compare.ROWS} <= produced
    assert compare.GROUPS[-1] == "scale"  # it restarts and kills brokers, so it runs last
