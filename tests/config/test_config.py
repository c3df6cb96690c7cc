"""Option keys: defaults, Hudi aliases, unknown keys, bad values."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import pytest

from markerstore import Table, config
from markerstore.errors import ConfigError


def test_defaults_match_hudi() -> None:
    settings = config.resolve(None)
    assert settings[config.MARKERS_TYPE] == "direct"
    assert settings[config.BATCH_INTERVAL_MS] == 50
    assert settings[config.BATCH_NUM_THREADS] == 20
    assert settings["hoodie.markers.delete.parallelism"] == 100
    assert settings[config.HEARTBEAT_INTERVAL_MS] == 60000
    assert settings[config.HEARTBEAT_TOLERABLE_MISSES] == 2
    assert settings[config.CONFLICT_MODE] == "fail"
    assert settings[config.UPLOAD_PART_SIZE] == 10 * 1024 * 1024
    assert settings[config.COMMIT_THREADS] == 8


def test_aliases_map_to_canonical_keys() -> None:
    settings = config.resolve({
        "hoodie.write.markers.type": "timeline_server_based",
        "hoodie.markers.timeline_server_based.batch.interval_ms": "25",
        "s3.multipart.committer.conflict-mode": "REPLACE",
    })
    assert settings.explicit() == {config.MARKERS_TYPE: "batched",
                                   config.BATCH_INTERVAL_MS: 25,
                                   config.CONFLICT_MODE: "replace"}


def test_unknown_key_lists_close_matches() -> None:
    with pytest.raises(ConfigError) as info:
        config.resolve({"markerstore.write.marker.type": "direct"})
    assert "unknown option 'markerstore.write.marker.type'" in str(info.value)
    assert "markerstore.write.markers.type" in str(info.value)
    with pytest.raises(ConfigError, match="unknown option 'nothing.like.it'$"):
        config.resolve({"nothing.like.it": 1})


@pytest.mark.parametrize(("key", "value", "fragment"), [
    ("markerstore.markers.batch.interval_ms", "fast", "invalid literal"),
    ("markerstore.markers.batch.interval_ms", 0, ">= 1"),
    ("markerstore.write.markers.type", "carrier-pigeon", "expected one of direct, batched"),
    ("markerstore.write.early.conflict.detection.enable", "maybe", "true or false"),
])
def test_bad_values_name_the_key(key: str, value: object, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        config.resolve({key: value})
    assert key in str(info.value) and fragment in str(info.value)


def test_same_option_twice_is_an_error() -> None:
    with pytest.raises(ConfigError, match="given twice"):
        config.resolve({"markerstore.write.markers.type": "direct",
                        "hoodie.write.markers.type": "direct"})


def test_table_rejects_unknown_options() -> None:
    with pytest.raises(ConfigError, match="did you mean"):
        Table("memory://cfg/t", options={"hoodie.write.markers.typ": "direct"})


def test_describe_lists_every_key() -> None:
    keys = {row["key"] for row in config.describe()}
    assert keys == set(config.OPTIONS) | set(config.PREFIX_KEYS)
    row = next(r for r in config.describe() if r["key"] == config.MARKERS_TYPE)
    assert row["aliases"] == ["hoodie.write.markers.type"] and row["default"] == "direct"


def test_error_table_keys_resolve_in_a_fresh_interpreter() -> None:
    """The error table's keys are in markerstore.config: no import of errortable needed."""
    script = (
        "import sys, json\n"
        "from markerstore import config\n"
        "s = config.resolve({'markerstore.write.error.table.enabled': 'true',\n"
        "                    'hoodie.write.error.table.suffix': '_bad'})\n"
        "keys = [row['key'] for row in config.describe()]\n"
        "print(json.dumps({'enabled': s[config.ERROR_TABLE_ENABLED],\n"
        "                  'suffix': s[config.ERROR_TABLE_SUFFIX],\n"
        "                  'listed': config.ERROR_PAYLOAD_REDACT in keys,\n"
        "                  'errortable': 'errortable' in sys.modules}))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"enabled": True, "suffix": "_bad", "listed": True,
                                       "errortable": False}


def test_options_are_defined_once_and_never_added_at_import() -> None:
    assert not hasattr(config, "register")
    keys = [o.key for o in config._DEFINITIONS]
    assert len(keys) == len(set(keys)) == len(config.OPTIONS)
    with pytest.raises(ConfigError, match="defined twice"):
        config._index((config.OPTIONS[config.MARKERS_TYPE],) * 2)


def _page_options() -> dict[str, list[str]]:
    """docs/CONFIGURATION.md's option table: key -> [default, aliases, doc] cells."""
    page = pathlib.Path(__file__).resolve().parents[2] / "docs" / "CONFIGURATION.md"
    section = page.read_text().split("<!-- options:", 1)[1]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 4:
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def _shown(default: object) -> set[str]:
    """How the page may show a default: (none), (empty), `value`, or `N MiB` for whole
    MiB."""
    if default is None:
        return {"(none)"}
    if default == "":
        return {"(empty)"}
    mib = 1024 * 1024
    if isinstance(default, int) and not isinstance(default, bool) and default % mib == 0:
        return {f"`{default}`", f"`{default // mib} MiB`"}
    return {f"`{default}`"}


def test_configuration_page_matches_config() -> None:
    """docs/CONFIGURATION.md's table: every key, with its definition's default, aliases, doc."""
    rows = _page_options()
    assert sorted(rows) == sorted([*config.OPTIONS, *config.PREFIX_KEYS])
    for key, (default, aliases, doc) in rows.items():
        if key in config.PREFIX_KEYS:
            assert (default, aliases, doc) == ("(none)", "", config.PREFIX_KEYS[key]), key
            continue
        option = config.OPTIONS[key]
        assert default in _shown(option.default), key
        assert re.findall(r"`([^`]+)`", aliases) == list(option.aliases), key
        assert doc == option.doc, key


def test_iceberg_catalog_keys_are_kept_as_text_under_their_prefix() -> None:
    """A key of the Iceberg catalog family resolves (any case of its prefix, as Spark's
    lowercased options arrive) to the prefix's spelling with the property name kept; an
    unknown key is still refused."""
    settings = config.resolve({"MARKERSTORE.TABLE.ICEBERG.CATALOG.uri": "sqlite:////x.db",
                               config.ICEBERG_CATALOG_PREFIX + "s3.endpoint": 9000,
                               config.ICEBERG_IDENTIFIER: "lake.events"})
    assert settings.explicit() == {config.ICEBERG_CATALOG_PREFIX + "uri": "sqlite:////x.db",
                                   config.ICEBERG_CATALOG_PREFIX + "s3.endpoint": "9000",
                                   config.ICEBERG_IDENTIFIER: "lake.events"}
    with pytest.raises(ConfigError, match="unknown option"):
        config.resolve({config.ICEBERG_CATALOG_PREFIX: "x"})  # no property name
