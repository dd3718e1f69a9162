"""The pure parts of `insync groups reset-offsets`: Kafka's topic arguments, datetimes, clamping and table."""

from __future__ import annotations

import pytest

from insync.cli.groups_reset import Scope, clamp, format_plan, parse_datetime_ms, parse_topic_arg, shifted
from insync.cli.main import main
from insync.config import ConfigError


def test_topic_args_name_a_topic_or_some_of_its_partitions() -> None:
    assert parse_topic_arg("orders") == Scope("orders", None)
    assert parse_topic_arg("orders:0,2") == Scope("orders", (0, 2))
    with pytest.raises(ConfigError, match="Invalid partition 'x' specified in topic arg 'orders:0,x'"):
        parse_topic_arg("orders:0,x")
    with pytest.raises(ConfigError, match="Invalid partition '' specified in topic arg 'orders:'"):
        parse_topic_arg("orders:")
    with pytest.raises(ConfigError, match="Invalid topic arg 'a:1:2', expected topic name and partitions"):
        parse_topic_arg("a:1:2")


def test_datetimes_read_as_kafkas_utils_get_date_time() -> None:
    assert parse_datetime_ms("2020-11-10T16:51:38.198") == 1605027098198  # no zone: UTC
    assert parse_datetime_ms("2020-11-10T16:51:38.198Z") == 1605027098198
    eight_hours_ms = 8 * 3600 * 1000
    for zone in ("+08:00", "+0800", "+08"):
        assert parse_datetime_ms(f"2020-11-10T16:51:38.198{zone}") == 1605027098198 - eight_hours_ms
    assert parse_datetime_ms("2020-11-10T16:51:38.198-01:30") == 1605027098198 + 90 * 60 * 1000
    with pytest.raises(ConfigError, match="does not contain a 'T'"):
        parse_datetime_ms("2020-11-10 16:51:38.198")
    for bad in ("2020-11-10T16:51:38", "2020-13-10T16:51:38.198", "yesterdayT"):
        with pytest.raises(ConfigError, match="Unparseable date"):
            parse_datetime_ms(bad)


def test_offsets_outside_the_log_move_to_its_nearest_end_with_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    assert clamp(("t", 0), 5, 2, 9) == 5
    assert clamp(("t", 0), 50, 2, 9) == 9
    assert clamp(("t", 1), -3, 2, 9) == 2
    err = capsys.readouterr().err
    assert "New offset (50) is higher than latest offset for topic partition t-0. Value will be set to 9." in err
    assert "New offset (-3) is lower than earliest offset for topic partition t-1. Value will be set to 2." in err


def test_shift_by_needs_a_committed_offset() -> None:
    assert shifted({("t", 0): 10}, ("t", 0), -4) == 6
    with pytest.raises(ConfigError, match="Cannot shift offset for partition t-1 since there is no current"):
        shifted({("t", 0): 10}, ("t", 1), 1)


def test_the_plan_prints_in_kafkas_columns() -> None:
    assert format_plan("g", {}) == ""
    assert format_plan("g", {("orders", 1): 7, ("orders", 0): 12}).splitlines() == [
        "",
        "GROUP           TOPIC           PARTITION  NEW-OFFSET",
        "g               orders          0          12",
        "g               orders          1          7",
    ]


@pytest.mark.parametrize("argv", [
    ["groups", "reset-offsets", "--group", "g", "--topic", "t"],  # no scenario
    ["groups", "reset-offsets", "--group", "g", "--to-earliest"],  # no scope
    ["groups", "reset-offsets", "--group", "g", "--topic", "t", "--all-topics", "--to-latest"],
    ["groups", "reset-offsets", "--group", "g", "--topic", "t", "--to-latest", "--to-earliest"],
    ["groups", "reset-offsets", "--group", "g", "--topic", "t", "--to-latest", "--dry-run", "--execute"],
    ["groups", "delete"],  # no --group
])
def test_wrong_arguments_exit_2_with_usage(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2


def test_bad_topic_and_datetime_are_one_line_errors_before_any_connection(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["groups", "reset-offsets", "--group", "g", "--bootstrap-server", "127.0.0.1:9"]
    assert main([*base, "--topic", "t:x", "--to-earliest"]) == 1
    assert "Invalid partition 'x'" in capsys.readouterr().err
    assert main([*base, "--topic", "t", "--to-datetime", "2020-11-10"]) == 1
    assert "does not contain a 'T'" in capsys.readouterr().err
