"""Spark's `encoding` (alias `charset`): files in ISO-8859-1, Windows-1252 or UTF-16 read
as the same text in UTF-8 reads, whole or in blocks, and a record the named encoding
cannot decode is one `encoding` error record holding its bytes as they are in the file."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from markerstore import config
from markerstore.errors import ConfigError
from tests.support.ingest_run import reasons, run

DDL = "id BIGINT, s STRING, d DOUBLE"
# Pieces of CSV text: quotes, separators, line ends, and characters beyond ASCII that
# each encoding has (Windows-1252's € and curly quotes, Latin-1's é and ÿ).
_PIECES = {
    "iso-8859-1": ["é", "ÿ", "\u00a0", "Ä"],
    "windows-1252": ["é", "€", "“", "”", "Š"],
    "utf-16": ["é", "€", "日本", "😀"],
    "utf-16le": ["é", "€", "😀"],
    "utf-16be": ["é", "€", "😀"],
}
_CODEC = {"iso-8859-1": "latin-1", "windows-1252": "cp1252", "utf-16": "utf-16",
          "utf-16le": "utf-16-le", "utf-16be": "utf-16-be"}
_CSV = ['"', ",", "\n", "\r\n", "a", '""', '"x,y"', '"x\ny"', "1", "2.5", " "]


def _comparable(errors: list[dict[str, object]]) -> list[tuple[str, str]]:
    return reasons(errors)


@settings(max_examples=60, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from(sorted(_PIECES)), st.data(), st.integers(16, 96))
def test_a_file_in_an_encoding_reads_as_its_text_in_utf8(tmp_path: Path, encoding: str,
                                                        data: st.DataObject, block: int
                                                        ) -> None:
    pieces = data.draw(st.lists(st.sampled_from(_CSV + _PIECES[encoding]), max_size=40))
    ids = data.draw(st.lists(st.integers(0, 9), min_size=len(pieces), max_size=len(pieces)))
    text = "id,s,d\n" + "".join(f"{i},{p}\n" if i % 3 == 0 else p
                                for i, p in zip(ids, pieces, strict=True))
    expected = run(tmp_path / "utf8.csv", text.encode(), DDL)
    options = {"encoding": encoding}
    encoded = text.encode(_CODEC[encoding])
    whole = run(tmp_path / "in.csv", encoded, DDL, options=options)
    pieces_read = run(tmp_path / "in.csv", encoded, DDL, options=options, block_bytes=block)
    for rows, errors in (whole, pieces_read):
        assert rows == expected[0]
        assert _comparable(errors) == _comparable(expected[1])
        assert sorted(e["record"] for e in errors) == sorted(e["record"] for e in expected[1])


@pytest.mark.parametrize(("encoding", "data", "kept"), [
    ("windows-1252", b"id,s,d\n1,a\x81b,\n2,ok,\n", b"1,a\x81b,"),
    ("utf-16le", "id,s,d\n1,a".encode("utf-16-le") + b"\x00\xd8"
     + "b,\n2,ok,\n".encode("utf-16-le"), "1,a".encode("utf-16-le") + b"\x00\xd8"
     + "b,".encode("utf-16-le")),
    ("utf-16", "id,s,d\n1,a".encode("utf-16") + b"\x00\xd8" + "b,\n2,ok,\n".encode("utf-16-le"),
     "1,a".encode("utf-16-le") + b"\x00\xd8" + "b,".encode("utf-16-le")),
])
def test_a_record_the_encoding_cannot_decode_is_one_error_with_its_bytes(
        tmp_path: Path, encoding: str, data: bytes, kept: bytes) -> None:
    rows, errors = run(tmp_path / "in.csv", data, DDL, options={"charset": encoding})
    assert rows == [{"id": 2, "s": "ok", "d": None}]
    assert reasons(errors) == [("encoding", "2")]
    assert base64.b64decode(errors[0]["context"]["recordBase64"]) == kept


def test_latin1_json_lines_read_and_utf16_json_documents_too(tmp_path: Path) -> None:
    line = '{"id": 1, "s": "café"}\n{"id": 2, "s": "ÿ"}\n'
    rows, errors = run(tmp_path / "in.json", line.encode("latin-1"), DDL,
                       options={"encoding": "latin1"})
    assert [r["s"] for r in rows] == ["café", "ÿ"] and errors == []
    document = '[{"id": 1, "s": "日本"},\n {"id": 2, "s": "€"}]\n'
    rows, errors = run(tmp_path / "doc.json", document.encode("utf-16"), DDL,
                       options={"encoding": "utf-16", "multiLine": "true"})
    assert sorted(r["s"] for r in rows) == sorted(["日本", "€"]) and errors == []


@pytest.mark.parametrize("value", ["utf-32", "shift_jis", "ascii", ""])
def test_an_encoding_not_read_is_refused_in_one_line(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config.resolve({"encoding": value})
    message = str(caught.value)
    assert message.startswith("option encoding: expected one of utf-8") and "\n" not in message


def test_a_utf16_document_over_the_size_limit_is_one_size_error_not_cut(tmp_path: Path
                                                                         ) -> None:
    """The limit counts the document's UTF-8 bytes, read through: no part of a document
    larger than the limit is taken for the whole of it."""
    document = "[" + ",\n".join(f'{{"id": {i}, "s": "x"}}' for i in range(20)) + "]\n"
    options = {"encoding": "utf-16", "multiLine": "true",
               "markerstore.ingest.record.max_bytes": "300"}
    rows, errors = run(tmp_path / "doc.json", document.encode("utf-16"), DDL,
                       options=options)
    assert rows == [] and reasons(errors) == [("size", "1")]
    assert errors[0]["context"]["recordBytes"] == str(len(document.encode()))


@pytest.mark.spark
def test_exports_in_other_encodings_through_the_cli_and_ingest(spark: Any, tmp_path: Path
                                                              ) -> None:
    """A Windows-1252 CSV through the CLI and UTF-16 JSON lines (a file of its own task)
    through `markerstore.ingest`, read back from the commit: no record lost."""
    from click.testing import CliRunner

    from markerstore.cli import cli
    from markerstore.ingest.pipeline import ingest
    from tests.support.readback import assert_records, data_rows

    source = tmp_path / "csv"
    source.mkdir()
    (source / "export.csv").write_bytes("id,s\n1,€ “x”\n2,Šarūnas\n".encode("cp1252",
                                                                             "replace"))
    table = str(tmp_path / "t")
    out = CliRunner().invoke(cli, ["ingest", str(source), table, "--schema",
                                   "id BIGINT, s STRING", "--no-progress", "--markers",
                                   "direct", "--option", "charset=windows-1252"])
    assert out.exit_code == 0, out.output
    rows = sorted(data_rows(table).to_pylist(), key=lambda r: r["id"])
    assert [r["s"] for r in rows] == ["€ “x”", "Šar?nas"]
    assert_records(table, 2, rows=2, errors={})
    lines = tmp_path / "json"
    lines.mkdir()
    text = "".join(f'{{"id": {i}, "s": "日本 {i}"}}\n' for i in range(50))
    (lines / "u.json").write_bytes(text.encode("utf-16"))
    other = str(tmp_path / "u")
    result = ingest(str(lines), other, schema="id BIGINT, s STRING", spark=spark,
                    markers="direct", progress=False, options={"encoding": "UTF-16"})
    assert result.error_records == {} and result.source_records == 50
    assert sorted(r["s"] for r in data_rows(other).to_pylist()) == sorted(
        f"日本 {i}" for i in range(50))


def test_utf16_json_lines_are_read_whole_not_in_byte_ranges(tmp_path: Path) -> None:
    """A byte range of UTF-16 cannot tell where its first line starts (a newline is two
    bytes, and 0x0A is half of other characters too): the file is one task."""
    text = "".join(f'{{"id": {i}, "s": "\u010a{i}"}}\n' for i in range(60))
    counts: dict[str, int] = {}
    rows, errors = run(tmp_path / "u.json", text.encode("utf-16le"), DDL, split_bytes=256,
                       options={"encoding": "utf-16le"}, counts=counts)
    assert errors == [] and sorted(r["id"] for r in rows) == list(range(60))
    assert counts["records"] == 60
