"""The seed scripts themselves: each names a packaged simulator scenario, the ones that need network namespaces
say so, and an unknown name is refused naming the known ones."""

from __future__ import annotations

import pytest

from insync.chaos import seeds
from insync.config import ConfigError


def test_every_seed_names_a_packaged_simulator_scenario() -> None:
    from insync.sim.scenario import scenario_names

    assert {s.sim for s in seeds.SEEDS} <= set(scenario_names())
    assert len({s.name for s in seeds.SEEDS}) == len(seeds.SEEDS)


def test_the_seeds_that_need_network_namespaces_say_so() -> None:
    assert {s.name for s in seeds.SEEDS if s.namespaces} == {"last-replica-standing", "last-replica-standing-kafka-3",
                                                              "slow-follower", "partitioned-follower",
                                                              "slow-link-follower"}


def test_an_unknown_seed_name_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown seed scenario 'nope'; known: stuck-follower"):
        seeds.seed_named("nope")
