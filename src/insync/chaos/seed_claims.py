"""The claims a seed's run must satisfy, each a function of a `SeedRun` that returns the claims it broke, naming what
was seen. The same function judges the simulator's run and the real cluster's, so every claim is stated against
the run's own `replica.lag.time.max.ms` ("removed between lag and 1.5 x lag", "offline for a while"), with a
slack for a loaded machine's scheduling on real runs only.
"""

from __future__ import annotations

from typing import Any

from insync.chaos.seed_model import SeedRun

# A removal later than 1.5 x the lag by less than this is the machine's scheduling, not the rule: the real
# brokers share few cores with the test, the clients and other work, so a loaded machine delays a removal by
# up to a lag. The lower bound (never before the lag) has no slack.
SCHEDULING_SLACK_LAGS = 1.0
# How soon after a propagation a broker's metadata shows it, as the harness sees it: the broker's long poll of the
# controller answers at once, and the watch asks each broker every WATCH_S (seeds_run.py).
VISIBLE_MS = 1000
# A leader reports an ISR change when the controller's answer arrives, after the commit its blackout counts from:
# a real publication may come this much less than a blackout after the event.
ANSWER_MS = 250


def _expect(failures: list[str], ok: bool, claim: str, seen: object) -> None:
    if not ok:
        failures.append(f"{claim} (seen: {seen})")


def _no_loss(run: SeedRun, failures: list[str]) -> None:
    _expect(failures, run.acked > 0, "writes acknowledged", run.acked)
    _expect(failures, run.lost == 0, "no acknowledged write lost", run.lost)


def _rejoined(run: SeedRun, broker: int, after_ms: int) -> bool:
    return any(a["broker"] == broker for e in run.of("isr_expand") if e["ts_ms"] > after_ms for a in e["added"])


def check_stuck_follower(run: SeedRun) -> list[str]:
    """Removed once as stuck, after the lag and by 1.5 x the lag since it was last caught up; back after it
    resumes; acks=all kept succeeding with the other two (no NOT_ENOUGH_REPLICAS)."""
    failures: list[str] = []
    removals = run.removals()
    _expect(failures, len(removals) == 1 and removals[0]["reason"] in run.removed_for("stuck"),
            "one removal, reason stuck", removals)
    waited = run.waited_lags()
    _expect(failures, len(waited) == 1 and 1 < waited[0] <= 1.5 + _slack(run), "removed between lag and 1.5 x lag",
            waited)
    if removals:
        _expect(failures, _rejoined(run, removals[0]["broker"], removals[0]["ts_ms"]), "rejoined after resuming",
                run.of("isr_expand"))
    _expect(failures, run.not_enough_replicas == 0, "no NOT_ENOUGH_REPLICAS", run.not_enough_replicas)
    _no_loss(run, failures)
    return failures


def check_slow_leader_flag_off(run: SeedRun) -> list[str]:
    """Seed 000 with KIP-501 off and Kafka 3.x's election: both followers leave though they fetch, the partition
    is under min ISR (acks=all cannot succeed), and the leader's death takes it offline; nothing acknowledged is
    lost. Whether a produce is refused NOT_ENOUGH_REPLICAS is a race (tests/sim says so: the producer's first
    batches after the restart against the ISR expansions), so the count is shown, not claimed."""
    failures: list[str] = []
    removed = {r["broker"] for r in run.removals()}
    _expect(failures, len(removed) == 2, "both followers removed", sorted(removed))
    _expect(failures, run.under_min_isr_s > 0, "under min ISR for a while", run.under_min_isr_s)
    _expect(failures, bool(run.of("partition_offline")) and run.offline_s > 0, "offline after the leader died",
            run.offline_s)
    _no_loss(run, failures)
    return failures


def check_slow_leader_flag_on(run: SeedRun) -> list[str]:
    """Seed 000 with KIP-501 on: reads under the lag count as catch-ups, nobody leaves, and when the leader dies
    a follower takes over without loss or an unclean election."""
    failures: list[str] = []
    _expect(failures, not run.of("isr_shrink"), "no ISR shrink", run.removals())
    moves = [e for e in run.of("leader_change") if e["reason"] != "created"]
    _expect(failures, bool(moves) and moves[0]["leader_after"] != -1, "a follower took over", moves[:1])
    _expect(failures, run.unclean == 0, "no unclean election", run.unclean)
    _no_loss(run, failures)
    return failures


def check_failing_partition(run: SeedRun) -> list[str]:
    """Seed 002: one partition's appends fail on a follower; it marks that partition failed and keeps
    replicating the others (they stay in the ISR for at least a lag after it leaves), and after a restart the
    partition rejoins."""
    failures: list[str] = []
    failed = run.of("partition_failed")
    _expect(failures, len({e["partition"] for e in failed}) == 1, "one partition failed",
            sorted({e["partition"] for e in failed}))
    shrinks = run.of("isr_shrink")
    if not failed or not shrinks:
        return [*failures, f"the failed partition left the ISR (seen: {len(shrinks)} shrinks)"]
    partition, first = failed[0]["partition"], shrinks[0]
    _expect(failures, first["partition"] == partition, "the failed partition left the ISR first", first["partition"])
    soon = [e["partition"] for e in shrinks[1:] if e["ts_ms"] - first["ts_ms"] < run.lag_ms]
    _expect(failures, not soon, "the others stayed in the ISR for at least a lag", soon)
    victim = first["removed"][0]["broker"]
    _expect(failures, any(a["broker"] == victim for e in run.of("isr_expand", partition)
                          if e["ts_ms"] > failed[0]["ts_ms"] for a in e["added"]), "rejoined after the restart",
            run.of("isr_expand", partition))
    _expect(failures, run.acked > 0, "writes acknowledged", run.acked)
    return failures


def check_leader_failover(run: SeedRun) -> list[str]:
    """Leaders killed, paused past the session timeout and stopped under acks=all with min ISR 2: each time a
    replica from the ISR takes over, no election is unclean and nothing acknowledged is lost."""
    failures: list[str] = []
    moves = [e for e in run.of("leader_change") if e["reason"] in ("fenced", "shutdown") and e["leader_after"] != -1]
    _expect(failures, bool(moves), "a replica from the ISR took over", len(moves))
    _expect(failures, all(e["leader_after"] in e["isr"] for e in moves), "every new leader in its ISR",
            [(e["leader_after"], e["isr"]) for e in moves])
    _expect(failures, run.unclean == 0, "no unclean election", run.unclean)
    _no_loss(run, failures)
    return failures


def check_rolling_restart(run: SeedRun) -> list[str]:
    """Clean stops of the leader: before the controller lets each broker go, every partition it led moves to
    another in-sync replica (reason shutdown); it rejoins after its restart; no partition is offline or under
    min ISR, no produce is refused, nothing is lost."""
    failures: list[str] = []
    fenced = run.of("broker_fenced")
    _expect(failures, bool(fenced), "brokers stopped", len(fenced))
    moved = [e for e in run.of("leader_change") if e["reason"] == "shutdown"]
    for fence in fenced:
        gone = fence["broker_id"]
        _expect(failures, any(e["leader_before"] == gone and e["ts_ms"] <= fence["ts_ms"] for e in moved),
                f"broker {gone}'s leaderships moved before it was let go", moved)
        _expect(failures, _rejoined(run, gone, fence["ts_ms"]), f"broker {gone} rejoined the ISRs", gone)
    _expect(failures, run.offline_s == 0 and run.under_min_isr_s == 0, "never offline or under min ISR",
            (run.offline_s, run.under_min_isr_s))
    _expect(failures, run.not_enough_replicas == 0, "no NOT_ENOUGH_REPLICAS", run.not_enough_replicas)
    _no_loss(run, failures)
    return failures


def check_log_start_race(run: SeedRun) -> list[str]:
    """Seed 004: the leader's log start moves past a lagging follower's fetch offset (DeleteRecords); the
    follower truncates to the new log start and fetches on, without marking the partition failed, and rejoins."""
    failures: list[str] = []
    _expect(failures, not run.of("partition_failed"), "no partition failed", run.of("partition_failed"))
    _expect(failures, bool(run.of("isr_shrink")) and bool(run.of("isr_expand")), "the follower left and rejoined",
            (len(run.of("isr_shrink")), len(run.of("isr_expand"))))
    reasons = sorted({e["reason"] for e in run.of("truncate")})
    _expect(failures, bool({"leader_log_start", "offset_out_of_range"} & set(reasons)),
            "the follower moved to the leader's log start", reasons)
    _no_loss(run, failures)
    return failures


def check_slow_follower(run: SeedRun) -> list[str]:
    """A follower that keeps fetching but receives less than is produced leaves as slow (not stuck), by 1.5 x the
    lag after it was last caught up."""
    failures: list[str] = []
    removals = run.removals()
    _expect(failures, bool(removals) and removals[0]["reason"] in run.removed_for("slow"), "removed as slow",
            removals[:1])
    waited = run.waited_lags()[:1]
    _expect(failures, bool(waited) and waited[0] <= 1.5 + _slack(run), "within 1.5 x the lag", waited)
    _no_loss(run, failures)
    return failures


def check_bursty_time_rule(run: SeedRun) -> list[str]:
    """Bursts far beyond replica.lag.max.messages with only the time rule: healthy followers stay in."""
    failures: list[str] = []
    _expect(failures, not run.of("isr_shrink"), "no ISR shrink", run.removals())
    _no_loss(run, failures)
    return failures


def check_bursty_count_rule(run: SeedRun) -> list[str]:
    """The same bursts with the count rule (replica.lag.max.messages): healthy followers flap, out by count and
    straight back (seed 001)."""
    failures: list[str] = []
    reasons = {r["reason"] for r in run.removals()}
    _expect(failures, reasons == {"messages"}, "removed by the count rule only", sorted(reasons))
    _expect(failures, bool(run.of("isr_expand")), "and back", len(run.of("isr_expand")))
    _no_loss(run, failures)
    return failures


def check_slow_link(run: SeedRun) -> list[str]:
    """A healthy follower behind a slow link (latency both ways, a narrow way in) under acks=all bursts: the time
    rule keeps it in the ISR, so no shrink and no under-replicated time at all, acks=all is never refused
    NOT_ENOUGH_REPLICAS, and nothing is lost."""
    failures: list[str] = []
    _expect(failures, not run.of("isr_shrink"), "no ISR shrink", run.removals())
    _expect(failures, run.urp_s == 0, "never under-replicated", run.urp_s)
    _expect(failures, run.not_enough_replicas == 0, "no NOT_ENOUGH_REPLICAS", run.not_enough_replicas)
    _no_loss(run, failures)
    return failures


def check_last_replica_standing(run: SeedRun) -> list[str]:
    """KIP-966 with ELR (the default): the ISR shrinks to the leader, which loses power and its unflushed tail;
    the partition stays offline until an eligible follower returns and leads, and nothing acknowledged is lost."""
    failures: list[str] = []
    changes = run.of("leader_change")
    offline = [e for e in changes if e["leader_after"] == -1]
    back = [e for e in changes if offline and e["ts_ms"] >= offline[0]["ts_ms"] and e["leader_after"] != -1]
    if not offline or not back:
        return [f"offline once the leader crashed, then online (seen: {len(offline)} offline, {len(back)} back)"]
    crashed, leader = offline[0]["leader_before"], back[0]["leader_after"]
    _expect(failures, leader != crashed and leader in offline[0].get("elr", []),
            "an eligible follower leads, not the crashed leader", (crashed, leader, offline[0].get("elr")))
    _expect(failures, run.unclean == 0, "no unclean election", run.unclean)
    _no_loss(run, failures)
    return failures


def check_last_replica_standing_kafka_3(run: SeedRun) -> list[str]:
    """The same with the Kafka 3.x election (ELR off): the crashed leader, still the ISR, is elected again with
    what it had fsynced, and acknowledged writes are lost though no election was unclean."""
    failures: list[str] = []
    changes = run.of("leader_change")
    offline = [e for e in changes if e["leader_after"] == -1]
    back = [e for e in changes if offline and e["ts_ms"] >= offline[0]["ts_ms"] and e["leader_after"] != -1]
    _expect(failures, bool(back) and back[0]["leader_after"] == offline[0]["leader_before"],
            "the crashed leader elected again", [(e["leader_before"], e["leader_after"]) for e in changes])
    _expect(failures, run.unclean == 0, "no unclean election", run.unclean)
    _expect(failures, run.lost > 0, "acknowledged writes lost", run.lost)
    return failures


def check_isr_propagation(run: SeedRun) -> list[str]:
    """Seed 003's first two phases: a paused broker leaves the ISR of every partition it follows within a lag,
    and all the ISR changes around its pause reach the brokers in 1 or 2 propagations; then a lone change (one
    partition failing on a follower) is published once it is a blackout old, by the next check. On a real
    cluster, each broker's own metadata shows it: its ISRs change only at those propagations, and the lone
    change reaches every broker after its publication."""
    failed = run.of("partition_failed")
    if not failed:
        return ["a partition failed on a follower (seen: none)"]
    check_ms, blackout_ms = run.propagation_ms
    late_ms = _slack(run) * run.lag_ms
    changes = [e for e in run.events if e["type"] in ("isr_shrink", "isr_expand")]
    burst = [e for e in changes if e["ts_ms"] < failed[0]["ts_ms"]]
    lone = [e for e in changes if e["ts_ms"] >= failed[0]["ts_ms"]][:1]
    if not burst or burst[0]["type"] != "isr_shrink" or not lone:
        return [f"ISR changes around the pause, then a lone one (seen: {len(burst)}, then {len(lone)})"]
    failures: list[str] = []
    paused = burst[0]["removed"][0]["broker"]
    followed = {e["partition"] for e in run.of("leader_change") if e["reason"] == "created" and paused in e["isr"]
                and e["leader_after"] != paused}
    by_ms = burst[0]["ts_ms"] + run.lag_ms + late_ms
    left = {e["partition"] for e in burst if e["type"] == "isr_shrink" and e["ts_ms"] <= by_ms
            and any(r["broker"] == paused for r in e["removed"])}
    _expect(failures, bool(followed) and followed <= left, f"broker {paused} left the ISR of each of the "
            f"{len(followed)} partitions it follows within a lag", sorted(followed - left))
    props = [e["ts_ms"] for e in run.of("metadata_propagated")]
    # A propagation after the lone change is the lone change's own, however late the burst's would be.
    window_end = min(burst[-1]["ts_ms"] + check_ms + blackout_ms + late_ms, lone[0]["ts_ms"])
    window = [p for p in props if burst[0]["ts_ms"] <= p < window_end]
    _expect(failures, 1 <= len(window) <= 2, f"the {len(burst)} ISR changes reached the brokers in 1 or 2 "
            "propagations", len(window))
    published = min((p for p in props if p >= lone[0]["ts_ms"]), default=None)
    delay = None if published is None else published - lone[0]["ts_ms"]
    early_ms = 0 if run.side == "sim" else ANSWER_MS
    _expect(failures, delay is not None and blackout_ms - early_ms <= delay <= blackout_ms + check_ms + late_ms,
            "the lone change published a blackout after it, by the next check", delay)
    if run.seen and published is not None:
        failures += _brokers_saw(run, paused, window, lone[0], published)
    return failures


def _brokers_saw(run: SeedRun, paused: int, window: list[int], lone: dict[str, Any], published: int) -> list[str]:
    """What the brokers' own metadata showed (real runs): each ISR change of a broker that kept answering
    came with one of the burst's propagations (within `VISIBLE_MS`), and the lone change reached every broker
    after it was published, within `VISIBLE_MS`."""
    failures: list[str] = []
    first: dict[tuple[int, int], dict[str, Any]] = {}  # (broker, partition) -> its first answer: no change
    stray = []
    for entry in run.seen:
        key = (entry["broker"], entry["partition"])
        if first.setdefault(key, entry) is entry or entry["broker"] == paused or entry["ts_ms"] >= lone["ts_ms"]:
            continue
        if not any(p <= entry["ts_ms"] <= p + VISIBLE_MS for p in window):
            stray.append((entry["broker"], entry["partition"], entry["ts_ms"]))
    _expect(failures, not stray, "each broker's ISRs changed only with a propagation", stray[:5])
    reached: dict[int, int] = {}
    for entry in run.seen:
        if entry["partition"] == lone["partition"] and sorted(entry["isr"]) == sorted(lone["isr_after"]):
            reached.setdefault(entry["broker"], entry["ts_ms"] - published)
    brokers = {entry["broker"] for entry in run.seen}
    _expect(failures, set(reached) == brokers and all(0 <= d <= VISIBLE_MS for d in reached.values()),
            "the lone change reached every broker's metadata after its publication", reached)
    return failures


def _slack(run: SeedRun) -> float:
    return 0.0 if run.side == "sim" else SCHEDULING_SLACK_LAGS
