"""`insync bench storage` measures real appends and reads beside plain file I/O (tiny run, no timing asserts)."""

from __future__ import annotations

from pathlib import Path

from insync.bench import storage


def test_bench_runs_both_batch_sizes(tmp_path: Path) -> None:
    results = storage.run(seconds=0.05, directory=str(tmp_path), bytes_max=40 * 1024 * 1024)
    assert [r.batch for r in results] == ["1MiB", "16KiB"]
    for result in results:
        assert result.batches > 0 and result.total_mb > 0
        assert result.append_mb_s > 0 and result.plain_write_mb_s > 0 and result.read_mb_s > 0
        assert result.append_ratio > 0 and result.read_ratio > 0
    assert list(tmp_path.iterdir()) == []  # the temporary files are removed
