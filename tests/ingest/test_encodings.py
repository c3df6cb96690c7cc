"""Spark's `encoding` (alias `charset`): files in ISO-8859-1, Windows-1252 or UTF-16 read
as the same text in UTF-8 reads, whole or in blocks, and a record the named encoding
cannot decode is one `encoding` error record holding its bytes as they are in the file."""

from __future__ import annotations

import base64
from pathlib import Path

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
