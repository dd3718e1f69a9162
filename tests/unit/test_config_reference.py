"""docs/configuration.md is the key table as `insync configs reference` renders it, and the page says what each
key is."""

from __future__ import annotations

from pathlib import Path

import pytest

from insync.cli.main import main
from insync.config_keys import BROKER_CONFIGS, INSYNC_KEYS, TOPIC_CONFIGS
from insync.config_reference import COMMAND, render

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_docs_configuration_md_is_current() -> None:
    assert PAGE.read_text() == render(), f"docs/configuration.md is not current: run `{COMMAND}`"


def test_every_key_is_on_the_page_once_in_its_group() -> None:
    page = render()
    kafka, own = page.split("## insync's own broker keys")
    for name in BROKER_CONFIGS:
        assert page.count(f"### `{name}`\n") == 1, name
        assert (f"### `{name}`\n" in own) == (name in INSYNC_KEYS), name
    assert all(f"### `{name}`\n" in page or f"Topic key: `{name}`" in page for name in TOPIC_CONFIGS)
    assert "### `replica.lag.time.max.ms`\n\nOut of sync after this long without catching up." in kafka


def test_a_key_shows_its_type_default_range_update_mode_and_topic_key() -> None:
    section = render().split("### `log.retention.bytes`\n")[1].split("###")[0]
    assert "- Type: long\n- Default: `-1`\n- Valid values: [-1,...]\n" in section
    assert "- Dynamic: per broker and cluster-wide\n- Topic key: `retention.bytes`\n" in section
    listeners = render().split("### `listeners`\n")[1].split("###")[0]
    assert "- Dynamic: no (read-only)\n" in listeners and "Topic key" not in listeners
    assert "- Valid values: [0,...,100]\n" in render().split("### `leader.imbalance.per.broker.percentage`\n")[1]


def test_the_command_prints_or_writes_the_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["configs", "reference"]) == 0
    assert capsys.readouterr().out == render()
    assert main(["configs", "reference", "--out", str(tmp_path / "c.md")]) == 0
    assert (tmp_path / "c.md").read_text() == render()
