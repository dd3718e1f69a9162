"""`insync topics elect-leaders` argument errors: refused before any broker is asked."""

from __future__ import annotations

import pytest

from insync.cli.main import main


@pytest.mark.parametrize("argv", [
    ["topics", "elect-leaders", "--dry-run", "t"],
    ["topics", "elect-leaders", "--dry-run"],
])
def test_dry_run_without_unclean_is_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--bootstrap-server", "127.0.0.1:9"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("insync: error: ") and "--dry-run needs --unclean" in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [
    ["topics", "elect-leaders", "--unclean=yes"],
    ["topics", "elect-leaders", "--dry-run", "--dry-run=1"],
])
def test_flags_take_no_values(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
