"""The ErrorRecord schema file and the options (RFC-20's names, local and global)."""

from __future__ import annotations

import json
import pathlib
from importlib.resources import files

import fastavro
import pyarrow as pa
import pytest

import errortable
from errortable import config as C
from errortable import schema as S
from markerstore import config as msconfig
from markerstore.config import ERROR_TABLE_BASE_PATH as BASE
from markerstore.config import ERROR_TABLE_NAME as NAME
from markerstore.errors import ConfigError

# RFC-20's ErrorRecord, field by field (restated here on purpose: the test is the check).
RFC_FIELDS = [
    {"name": "uid", "type": "string"},
    {"name": "ts", "type": "string"},
    {"name": "schema", "type": ["null", "string"], "default": None},
    {"name": "record", "type": ["null", "string"], "default": None},
    {"name": "message", "type": ["null", "string"], "default": None},
    {"name": "context", "type": ["null", {"type": "map", "values": "string"}], "default": None},
]


def test_avsc_parses_with_fastavro_and_equals_the_rfc() -> None:
    text = (files("markerstore.schemas") / "error_record.avsc").read_text()
    raw = json.loads(text)
    parsed = fastavro.schema.parse_schema(raw)
    assert parsed["name"] == "org.apache.hudi.common.ErrorRecord"
    assert raw["type"] == "record"
    assert raw["namespace"] == "org.apache.hudi.common"
    assert raw["name"] == "ErrorRecord"
    assert raw["fields"] == RFC_FIELDS
    assert set(raw) == {"type", "namespace", "name", "fields"}


def test_code_loads_the_schema_file_and_does_not_restate_it() -> None:
    assert S.avro_schema() == json.loads(
        (files("markerstore.schemas") / "error_record.avsc").read_text())
    package = pathlib.Path(errortable.__file__).parent
    for source in package.glob("*.py"):
        text = source.read_text()
        assert '"namespace"' not in text and "'namespace'" not in text, source
        assert '"values": "string"' not in text, source


def test_arrow_schema_is_derived_from_the_avsc() -> None:
    schema = S.arrow_schema()
    assert schema.names == ["uid", "ts", "schema", "record", "message", "context"]
    assert not schema.field("uid").nullable and not schema.field("ts").nullable
    assert schema.field("record").nullable
    assert schema.field("context").type == pa.map_(pa.string(), pa.string())


def test_defaults_are_the_rfcs() -> None:
    cfg = C.ErrorTableConfig.from_options({})
    assert cfg.enabled is False and cfg.suffix == "_errors" and cfg.name is None
    assert cfg.base_path is None and not cfg.is_global and cfg.format == "parquet"
    assert msconfig.OPTIONS[NAME].doc.count("hoodie_errors") == 1


def test_hoodie_spellings_are_aliases() -> None:
    cfg = C.ErrorTableConfig.from_options({
        "hoodie.write.error.table.enabled": "true",
        "hoodie.write.error.table.suffix": "_bad",
        "markerstore.write.error.table.payload.redact": "email, address.street"})
    assert cfg.enabled and cfg.suffix == "_bad"
    assert cfg.redact == ("email", "address.street")
    keys = {o["key"]: o for o in msconfig.describe()}
    assert "hoodie.write.error.table.base.path" in keys[BASE]["aliases"]


@pytest.mark.parametrize("options, message", [
    ({"markerstore.write.error.table.format": "orc"}, "avro, parquet"),
    ({"markerstore.write.error.table.suffix": "a/b"}, "folder name"),
    ({"markerstore.write.error.table.stacktrace.max_chars": "-1"}, ">= 0"),
    ({"hoodie.write.error.table.enable": "true"}, "did you mean"),
])
def test_bad_options_are_clear_errors(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        C.ErrorTableConfig.from_options(options)


def test_local_table_is_beside_the_target() -> None:
    loc = errortable.locate("s3://bucket/lake/events", {})
    assert loc == C.ErrorTableLocation("s3://bucket/lake/events_errors", False, "events_errors")
    loc = errortable.locate("/data/events/", {"hoodie.write.error.table.suffix": "_bad"})
    assert loc.url == "/data/events_bad"


def test_name_or_base_path_selects_the_global_table_and_ignores_the_suffix() -> None:
    by_name = errortable.locate("s3://b/lake/events", {
        "hoodie.write.error.table.name": "all_errors",
        "hoodie.write.error.table.suffix": "_ignored"})
    assert by_name == C.ErrorTableLocation("s3://b/lake/all_errors", True, "all_errors")
    by_base = errortable.locate("s3://b/lake/events",
                                {"hoodie.write.error.table.base.path": "s3://b/errors/"})
    assert by_base == C.ErrorTableLocation("s3://b/errors/hoodie_errors", True, "hoodie_errors")
    both = errortable.locate("/x/events", {BASE: "/e", NAME: "n"})
    assert both.url == "/e/n" and both.is_global


def test_global_table_may_not_sit_inside_the_target(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ConfigError, match="inside the target"):
        errortable.locate(str(tmp_path / "t"), {BASE: str(tmp_path / "t")})
    relative = errortable.locate("events", {})
    assert relative.url.startswith("/") and relative.url.endswith("events_errors")
