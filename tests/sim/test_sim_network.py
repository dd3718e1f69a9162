from __future__ import annotations

from dataclasses import dataclass

from insync.sim.network import Disconnected, LinkConfig, Network, record_bytes
from insync.sim.scheduler import Scheduler


@dataclass(frozen=True)
class Blob:
    records: bytes


def _net(config: LinkConfig, seed: int = 1) -> tuple[Scheduler, Network, list[tuple[object, object, int]]]:
    scheduler = Scheduler(seed)
    network = Network(scheduler, config)
    got: list[tuple[object, object, int]] = []

    def deliver(src: object, msg: object) -> None:
        got.append((src, msg, scheduler.elapsed_ms))

    for node in ("a", "b", "c"):
        network.register(node, deliver)
    return scheduler, network, got


def test_fifo_link_keeps_order_despite_jitter() -> None:
    scheduler, network, got = _net(LinkConfig(latency_ms=5, jitter_ms=50))
    for i in range(50):
        network.send("a", "b", i)
    scheduler.run_until(scheduler.now_ms + 1000)
    assert [msg for _, msg, _ in got] == list(range(50))
    assert all(t >= 5 for _, _, t in got)


def test_reordering_link_can_reorder() -> None:
    scheduler, network, got = _net(LinkConfig(latency_ms=5, jitter_ms=50, reorder=True))
    for i in range(50):
        network.send("a", "b", i)
    scheduler.run_until(scheduler.now_ms + 1000)
    assert sorted(int(str(msg)) for _, msg, _ in got) == list(range(50))
    assert [msg for _, msg, _ in got] != list(range(50))


def test_one_way_cut_and_symmetric_partition_and_heal() -> None:
    scheduler, network, got = _net(LinkConfig(latency_ms=1, jitter_ms=0))
    network.cut("a", "b")
    network.send("a", "b", "lost")
    network.send("b", "a", "kept")
    network.partition(["c"], ["a", "b"])
    network.send("c", "a", "lost")
    network.send("a", "c", "lost")
    scheduler.run_until(scheduler.now_ms + 10)
    assert [msg for _, msg, _ in got] == ["kept"]
    network.heal()
    network.send("a", "b", "after")
    scheduler.run_until(scheduler.now_ms + 10)
    assert [msg for _, msg, _ in got] == ["kept", "after"]


def test_kill_loses_messages_in_flight_to_the_dead_process() -> None:
    scheduler, network, got = _net(LinkConfig(latency_ms=10, jitter_ms=0))
    network.send("a", "b", "in flight")
    network.kill("b")
    network.send("a", "b", "to the new process")
    scheduler.run_until(scheduler.now_ms + 100)
    assert [msg for _, msg, _ in got] == ["to the new process"]
    assert network.stats.dropped_dead == 1


def test_clog_holds_messages_until_it_ends() -> None:
    scheduler, network, got = _net(LinkConfig(latency_ms=1, jitter_ms=0))
    network.clog("a", "b", scheduler.now_ms + 500)
    network.send("a", "b", 1)
    network.send("a", "c", 2)
    scheduler.run_until(scheduler.now_ms + 1000)
    assert [(msg, t) for _, msg, t in got] == [(2, 1), (1, 500)]


def test_bandwidth_charges_record_bytes_and_queues_on_the_link() -> None:
    scheduler, network, got = _net(LinkConfig(latency_ms=1, jitter_ms=0, bandwidth_bytes_per_ms=100))
    network.send("a", "b", Blob(b"x" * 1000))
    network.send("a", "b", Blob(b"x" * 1000))
    network.send("a", "c", "control")
    scheduler.run_until(scheduler.now_ms + 1000)
    assert sorted(t for _, _, t in got) == [1, 11, 21]
    assert record_bytes(Blob(b"abc")) == 3 and record_bytes("x") == 0


def test_one_link_slowed_with_jitter_keeps_its_order_and_the_others_their_latency() -> None:
    scheduler, network, got = _net(LinkConfig(latency_ms=1, jitter_ms=0))
    network.set_latency("a", "b", 20, 10)
    for i in range(30):
        network.send("a", "b", i)
    network.send("b", "a", "back")
    network.send("a", "c", "aside")
    scheduler.run_until(scheduler.now_ms + 100)
    on_link = [(msg, t) for _, msg, t in got if isinstance(msg, int)]
    assert [msg for msg, _ in on_link] == list(range(30))  # FIFO despite the jitter
    assert all(20 <= t <= 30 for _, t in on_link)
    assert len({t for _, t in on_link}) > 1  # the jitter varies the delay
    assert ("b", "back", 1) in got and ("a", "aside", 1) in got  # the reverse link and the others as they were


def test_clearing_a_link_latency_restores_the_network_latency_behind_what_is_in_flight() -> None:
    scheduler, network, got = _net(LinkConfig(latency_ms=1, jitter_ms=0))
    network.set_latency("a", "b", 50)
    network.send("a", "b", "slow")
    network.clear_latency("a", "b")
    network.send("a", "b", "after")  # a FIFO link: not before the slow one
    scheduler.run_until(scheduler.now_ms + 100)
    network.send("a", "b", "fast")
    scheduler.run_until(scheduler.now_ms + 100)
    assert [(msg, t) for _, msg, t in got] == [("slow", 50), ("after", 50), ("fast", 101)]


def test_random_drops_are_reproducible_from_the_seed() -> None:
    def run(seed: int) -> list[object]:
        scheduler, network, got = _net(LinkConfig(latency_ms=1, jitter_ms=3, drop_rate=0.3), seed)
        for i in range(100):
            network.send("a", "b", i)
        scheduler.run_until(scheduler.now_ms + 1000)
        return [msg for _, msg, _ in got]

    assert run(3) == run(3)
    assert 40 < len(run(3)) < 95


def test_swizzle_clog_delays_but_delivers_everything() -> None:
    scheduler, network, got = _net(LinkConfig(latency_ms=1, jitter_ms=0))
    network.swizzle_clog(["a", "b", "c"], 1000)
    scheduler.run_until(scheduler.now_ms + 100)
    for src in ("a", "b", "c"):
        for dst in ("a", "b", "c"):
            if src != dst:
                network.send(src, dst, (src, dst))
    scheduler.run_until(scheduler.now_ms + 5000)
    assert len(got) == 6
    assert max(t for _, _, t in got) > 100


def test_a_clean_close_resets_client_connections_and_refuses_new_ones_until_open() -> None:
    scheduler = Scheduler(1)
    network = Network(scheduler, LinkConfig(latency_ms=5, jitter_ms=0))
    got: dict[str, list[tuple[object, object]]] = {"broker": [], "client": [], "peer": []}
    network.register("broker", lambda src, msg: got["broker"].append((src, msg)))
    network.register("client", lambda src, msg: got["client"].append((src, msg)), hears_disconnects=True)
    network.register("peer", lambda src, msg: got["peer"].append((src, msg)))
    network.send("client", "broker", "in flight")
    network.close("broker")
    scheduler.run_until(scheduler.now_ms + 100)
    assert got["broker"] == []  # what was in flight died with the process
    assert got["client"] == [("broker", Disconnected("broker"))]  # the client hears of it at once
    assert got["peer"] == []  # other brokers and the controller notice by their own timeouts, as after a crash
    network.send("client", "broker", "refused")
    network.send("peer", "broker", "dropped")
    scheduler.run_until(scheduler.now_ms + 100)
    assert got["client"] == [("broker", Disconnected("broker"))] * 2 and got["broker"] == []
    network.open("broker")
    network.send("client", "broker", "accepted")
    scheduler.run_until(scheduler.now_ms + 100)
    assert got["broker"] == [("client", "accepted")]


def test_a_kill_is_silent_to_clients() -> None:
    scheduler = Scheduler(1)
    network = Network(scheduler, LinkConfig(latency_ms=5, jitter_ms=0))
    got: list[tuple[object, object]] = []
    network.register("broker", lambda src, msg: None)
    network.register("client", lambda src, msg: got.append((src, msg)), hears_disconnects=True)
    network.send("client", "broker", "lost")
    network.kill("broker")
    network.send("client", "broker", "delivered to the next process")
    scheduler.run_until(scheduler.now_ms + 100)
    assert got == []
