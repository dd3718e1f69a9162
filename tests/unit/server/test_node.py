"""The node process's set-up: its open files limit."""

from __future__ import annotations

import resource

from insync.server.node import raise_open_files_limit


def test_the_soft_open_files_limit_is_raised_to_the_hard_one() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowered = min(256, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))
    try:
        assert raise_open_files_limit() == hard
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
        assert raise_open_files_limit() == hard  # already there: nothing to do
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
