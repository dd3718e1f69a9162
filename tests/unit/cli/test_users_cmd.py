"""`insync users`: what it refuses before it talks to a cluster."""

from __future__ import annotations

import pytest

from insync.cli.main import main


@pytest.mark.parametrize("iterations", ["100", "20000"])
def test_iterations_outside_kafkas_bounds_are_refused(iterations: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["users", "add", "--user", "u", "--password", "p", "--iterations", iterations,
                 "--bootstrap-server", "127.0.0.1:9"])
    assert code == 1 and "--iterations must be in 4096..16384" in capsys.readouterr().err


def test_unknown_mechanism_is_an_argument_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["users", "delete", "--user", "u", "--mechanism", "GSSAPI"])
    assert exited.value.code == 2 and "SCRAM-SHA-512" in capsys.readouterr().err
