"""What `insync monitor` concludes about one partition from its events: the per-partition state and its alerts.

Pure: `step(state, events, now_ms, thresholds)` folds one micro-batch's events of one partition into its state
and returns the alerts due, its status line and when to look again. Time is event time: `now_ms` is the
stream's watermark (heartbeats included), so a cluster that stops stops its clock too: shutdown is not an outage.
Alerts, each once per episode (the state remembers which it sent), with their evidence:
- `leader_side`: the leader removed every follower within LEADER_SIDE_WINDOW_MS (seed 000), or removed
  followers whose fetches it was still serving. At once.
- `under_replicated` for `urp_ms`, with who left and why; `flapping`: `flap_count` shrinks in `flap_window_ms`;
- `under_min_isr` for `min_isr_ms`; `offline` for `offline_ms`;
- `data_at_risk`: an unclean election or recovery (at once), or an ISR of the leader alone for `risk_ms`.
Internal topics raise only `under_min_isr`, `offline` and `data_at_risk`. Episodes that follow a controlled
shutdown of the partition's leader are reported in the status and never alerted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ALERTED_REMEMBERED_MAX = 64  # episodes per partition whose alert was sent (the oldest are forgotten first)
SHRINKS_REMEMBERED_MAX = 100
SHUTDOWN_GRACE_MS = 1_000  # an episode starting this soon before the leader's controlled shutdown belongs to it
RECHECK_MS = 1_000
LEADER_SIDE_WINDOW_MS = 10_000  # every follower removed by the leader within this is a leader-side episode  # how often an open episode is looked at again when nothing about it arrives

# Internal topics (`__consumer_offsets`, `__insync_*`) follow every fault of their brokers: their replication-only
# alerts would repeat the user topics' fifty times over. They show in the status, and alert when they go offline,
# under min ISR or put data at risk.
INTERNAL_PREFIX = "__"
REPLICATION_ONLY = frozenset({"under_replicated", "flapping", "leader_side"})

State = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Thresholds:
    urp_ms: int = 5_000
    min_isr_ms: int = 2_000
    offline_ms: int = 2_000
    risk_ms: int = 2_000
    flap_count: int = 3
    flap_window_ms: int = 60_000

    def __post_init__(self) -> None:
        assert min(self.urp_ms, self.min_isr_ms, self.offline_ms, self.risk_ms) >= 0, self
        assert self.flap_count >= 2 and self.flap_window_ms > 0, self


@dataclass(frozen=True, slots=True)
class Alert:
    kind: str
    topic: str
    partition: int
    since_ms: int  # when the episode began (event time)
    due_ms: int  # when it became worth an alert: since_ms, or since_ms + its threshold
    cause: str
    evidence: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Outcome:
    state: State
    alerts: tuple[Alert, ...]
    status: str  # "" when the partition is healthy
    recheck: bool  # an episode is open: look again in RECHECK_MS even if no event comes


def new_state() -> State:
    return {"leader": -1, "isr": [], "urp": None, "min_isr": None, "offline": None, "single": None,
            "shutdown_ms": None, "failed": None, "shrinks": [], "flapping": None, "alerted": []}


def step(state: State, topic: str, partition: int, events: Sequence[Mapping[str, Any]], now_ms: int,
         thresholds: Thresholds) -> Outcome:
    """Fold `events` (this partition's, in time order) into `state`; the alerts due by `now_ms`."""
    s = {**state, "shrinks": list(state["shrinks"]), "alerted": list(state["alerted"])}
    alerts: list[Alert] = []
    for event in events:
        # What came due before this event, at its time: a monitor catching up on a backlog (after a stall or
        # a restart) still sees an episode that lasted its threshold and has ended since.
        alerts.extend(_due(s, topic, partition, int(event["ts_ms"]), thresholds))
        alerts.extend(_apply(s, topic, partition, event, thresholds))
        now_ms = max(now_ms, int(event["ts_ms"]))
    alerts.extend(_due(s, topic, partition, now_ms, thresholds))
    sent = [a for a in alerts if not (topic.startswith(INTERNAL_PREFIX) and a.kind in REPLICATION_ONLY)
            and _first_time(s, a)]
    return Outcome(s, tuple(sent), status(s, now_ms), any(s[k] for k in ("urp", "min_isr", "offline", "single")))


def _first_time(s: State, alert: Alert) -> bool:
    key = f"{alert.kind}@{alert.since_ms}"
    if key in s["alerted"]:
        return False
    s["alerted"] = [*s["alerted"], key][-ALERTED_REMEMBERED_MAX:]
    return True


def _apply(s: State, topic: str, partition: int, e: Mapping[str, Any], t: Thresholds) -> list[Alert]:
    kind, ts = e["type"], int(e["ts_ms"])
    if kind == "isr_shrink":
        return _shrink(s, topic, partition, e, t)
    if kind == "isr_expand":
        s["isr"] = list(e["isr_after"])
        s["removals"] = [x for x in s.get("removals", []) if x[1] not in s["isr"]]
        if len(s["isr"]) > 1:
            s["single"] = None
    elif kind == "under_replicated_start":
        s["urp"] = s["urp"] or _episode(ts, "a replica left the ISR by the controller (fenced or shut down)", {})
    elif kind == "under_replicated_end":  # whole again: a controlled shutdown's episodes are over too
        s["urp"], s["single"], s["failed"], s["shutdown_ms"] = None, None, None, None
    elif kind == "under_min_isr_start":
        s["min_isr"] = s["min_isr"] or _episode(ts, "produce with acks=all is refused", {"refused": 0})
        s["single"] = None
    elif kind == "under_min_isr_end":
        s["min_isr"] = None
    elif kind == "produce_rejected" and s["min_isr"] is not None:
        s["min_isr"]["evidence"]["refused"] = s["min_isr"]["evidence"].get("refused", 0) + int(e.get("count", 1))
    elif kind == "partition_failed":
        s["failed"] = {"broker": e["broker"], "error": e.get("error", "")}
    elif kind == "partition_offline":
        s["offline"] = s["offline"] or _episode(ts, "no replica can lead", {})
    elif kind == "partition_online":
        s["offline"] = None
    elif kind == "leader_change":
        return _leader_change(s, topic, partition, e)
    elif kind == "unclean_recovery":
        return [Alert("data_at_risk", topic, partition, ts, ts, "unclean recovery: offsets given up",
                      {"leader": e.get("leader_after"), "records_lost": e.get("records_lost"), "lost": e.get("lost")})]
    return []


def _episode(ts: int, cause: str, evidence: dict[str, Any]) -> dict[str, Any]:
    return {"since": ts, "cause": cause, "evidence": evidence}


def _shrink(s: State, topic: str, partition: int, e: Mapping[str, Any], t: Thresholds) -> list[Alert]:
    ts, leader = int(e["ts_ms"]), int(e["broker"])
    removed = [r if isinstance(r, Mapping) else {"broker": r} for r in e["removed"]]
    s["leader"], s["isr"] = leader, list(e["isr_after"])
    s["shrinks"] = [x for x in s["shrinks"] if x > ts - t.flap_window_ms][-SHRINKS_REMEMBERED_MAX:] + [ts]
    evidence = {"leader": leader, "isr_before": list(e["isr_before"]), "isr_after": list(e["isr_after"]),
                "removed": [dict(r) for r in removed]}
    pending = [r["broker"] for r in removed if r.get("fetch_pending") or r.get("pending_since_ms") is not None]
    # The leader's own removals since its ISR was last complete: followers that left one check apart, the leader
    # left alone, are the slow leader's symptom as much as followers removed at once.
    s["removals"] = [x for x in s.get("removals", []) if x[0] > ts - LEADER_SIDE_WINDOW_MS] + \
        [[ts, r["broker"]] for r in removed]
    together = sorted({b for _, b in s["removals"]})
    every_follower = s["isr"] == [leader] and len(together) >= 2
    alerts = []
    if every_follower or pending:
        why = (f"fetches from {_ids(pending)} were still being served" if pending
               else f"every follower ({_ids(together)}) removed within {LEADER_SIDE_WINDOW_MS // 1000} s")
        cause = f"leader-side: broker {leader}'s own reads were slow ({why})"
        alerts.append(Alert("leader_side", topic, partition, ts, ts, cause, evidence))
    else:
        reasons = ", ".join(f"{r['broker']} {r.get('reason', '')}".strip() for r in removed)
        cause = f"follower {reasons}" + (f" (partition failed on {s['failed']['broker']})" if s["failed"] else "")
    s["urp"] = _episode(s["urp"]["since"] if s["urp"] else ts, cause, evidence)
    if len(s["isr"]) == 1 and s["min_isr"] is None:
        s["single"] = s["single"] or _episode(ts, f"ISR is leader {leader} alone", evidence)
    if len(s["shrinks"]) < t.flap_count:
        s["flapping"] = None
    else:  # one episode while the shrinks keep coming within the window
        s["flapping"] = s.get("flapping") or s["shrinks"][-t.flap_count]
        alerts.append(Alert("flapping", topic, partition, s["flapping"], ts,
                            f"{len(s['shrinks'])} ISR shrinks in {(ts - s['shrinks'][0]) / 1000:.1f} s",
                            {"shrinks_ms": s["shrinks"]}))
    return alerts


def _leader_change(s: State, topic: str, partition: int, e: Mapping[str, Any]) -> list[Alert]:
    ts = int(e["ts_ms"])
    s["leader"], s["isr"] = int(e["leader_after"]), list(e.get("isr", s["isr"]))
    s["shutdown_ms"] = ts if e.get("reason") == "shutdown" else None
    if e.get("reason") == "unclean":
        return [Alert("data_at_risk", topic, partition, ts, ts, f"unclean election of broker {e['leader_after']}",
                      {"leader_before": e.get("leader_before"), "leader_after": e["leader_after"],
                       "isr": e.get("isr")})]
    return []


def _ids(brokers: Any) -> str:
    return ",".join(str(b) for b in brokers)


# (state key, alert kind, threshold attribute)
_TIMED = (("urp", "under_replicated", "urp_ms"), ("min_isr", "under_min_isr", "min_isr_ms"),
          ("offline", "offline", "offline_ms"), ("single", "data_at_risk", "risk_ms"))


def _due(s: State, topic: str, partition: int, now_ms: int, t: Thresholds) -> list[Alert]:
    alerts = []
    for key, kind, attribute in _TIMED:
        episode = s[key]
        if episode is None or _after_shutdown(s, episode):
            continue
        due = episode["since"] + getattr(t, attribute)
        if now_ms >= due:
            evidence = {**episode["evidence"], "lasted_ms": now_ms - episode["since"]}
            alerts.append(Alert(kind, topic, partition, episode["since"], due, episode["cause"], evidence))
    return alerts


def _after_shutdown(s: State, episode: Mapping[str, Any]) -> bool:
    return s["shutdown_ms"] is not None and episode["since"] >= s["shutdown_ms"] - SHUTDOWN_GRACE_MS


def status(s: State, now_ms: int) -> str:
    """One line on what is wrong with the partition now, "" when nothing is."""
    parts = []
    for key, label in (("offline", "OFFLINE"), ("min_isr", "under min ISR"), ("urp", "under-replicated"),
                       ("single", "ISR of one")):
        episode = s[key]
        if episode is not None:
            why = "controlled shutdown" if _after_shutdown(s, episode) else episode["cause"]
            parts.append(f"{label} {max(0, now_ms - episode['since']) / 1000:.0f} s: {why}")
    return "; ".join(dict.fromkeys(parts))
