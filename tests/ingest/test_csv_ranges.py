"""A CSV file read in byte ranges gives the records of the file read whole, wherever the
ranges are cut: quoted newlines, escaped quotes, CRLF, empty lines, multi-byte UTF-8, a
byte order mark and a quote that never closes (markerstore.ingest.csvranges); every record
once, with its offset and line; and a record over the size limit is one error record that
no range reads far past its neighbour's end for."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import fsspec.implementations.local as local
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from markerstore.ingest import csvranges
from markerstore.ingest.blocks import ReadOptions, read_blocks
from markerstore.ingest.csvranges import inside_at
from markerstore.ingest.quotestates import quote_states
from markerstore.ingest.sources import SourceTask, list_tasks
from tests.support.ingest_run import run

Record = tuple[int, int, Any]  # (offset, line in the file, text or (reason, size))


_LINE_ENDS = re.compile(rb"\r\n?|\n")  # LF, CRLF or a lone CR (the default lineSep)


def _line_ends(sep: str | None) -> re.Pattern[bytes]:
    """What ends a line: LF, CRLF or a lone CR; or a lineSep of its own alone."""
    return _LINE_ENDS if sep is None else re.compile(re.escape(sep.encode()))


def _first_line_start(data: bytes, start: int, sep: str | None = None) -> int:
    """The first line start at or after `start`, written out from the rule."""
    if start == 0:
        return 0
    for found in _line_ends(sep).finditer(data):
        if found.end() >= start and not (sep is None and found.end() == start
                                         and found.group() == b"\r"
                                         and data[start:start + 1] == b"\n"):
            return found.end()
    return len(data)


def _read(path: Path, tasks: list[SourceTask], options: ReadOptions,
          block_bytes: int = 16, driver: bool = False) -> list[Record]:
    """Every record of `tasks` (lines counted from the file's first line), and last the
    physical lines the blocks hold (each counted by one range). With `driver`, each range
    is given its quote state by the driver's first pass (else it finds it itself)."""
    data = path.read_bytes()
    found: list[Record] = []
    lines = 0
    if driver:
        tasks = quote_states(tasks, None, options)
    for task in tasks:
        sep = options.line_sep
        before = len(_line_ends(sep).findall(data[:_first_line_start(data, task.start, sep)]))
        for block in read_blocks(task, None, block_bytes, options):
            lines += block.line_count
            found += [(o, before + line, text) for text, line, o in
                      zip(block.records.to_pylist(), block.lines.tolist(),
                          block.offsets.tolist(), strict=True)]
            found += [(r.offset, before + r.line, (r.reason, r.size)) for r in block.raw]
    return [*sorted(found), (len(data), 0, ("lines", lines))]


def _ranges(url: str, cuts: list[int]) -> list[SourceTask]:
    points = [0, *sorted(set(cuts)), None]
    return [SourceTask(url, "csv", a, b) for a, b in itertools.pairwise(points)]


def _same_at_every_cut(path: Path, data: bytes, options: ReadOptions, pieces: int) -> None:
    path.write_bytes(data)
    url = f"file://{path}"
    whole = _read(path, [SourceTask(url, "csv")], options)
    assert whole  # the data holds records
    for cuts in itertools.combinations(range(1, len(data)), pieces - 1):
        driver = sum(cuts) % 2 == 0  # told its state by the driver, or finding it
        assert _read(path, _ranges(url, list(cuts)), options, driver=driver) == whole, cuts


TRICKY = ('\ufeffa,b,c\r\n1,"x\ny",é\n\n2,"q""\n""",日本\r\n"a,\r\nb",,\n'
          '3,x"y,z\n"4",5"6,7\n8,"open\n').encode()


def test_every_pair_of_cut_points_reads_the_records_of_the_whole_file(tmp_path: Path
                                                                      ) -> None:
    """Three ranges, cut at every pair of byte positions (inside a BOM, a CRLF, a
    multi-byte character, a quoted newline, a doubled quote)."""
    _same_at_every_cut(tmp_path / "f.csv", TRICKY, ReadOptions(), 3)


def test_every_cut_with_a_backslash_escape(tmp_path: Path) -> None:
    data = b'a,b\n1,"x\\"\ny"\n2,"\\\\"\n3,"p\\\nq",r\n4,"\\"\n5,\n'
    _same_at_every_cut(tmp_path / "f.csv", data, ReadOptions(escape="\\"), 3)


def test_every_cut_with_comment_lines(tmp_path: Path) -> None:
    """Comment lines holding quotes, one inside a quoted field (text there, not a
    comment), one last without its line end."""
    data = b'a,b\n#say "hi\n1,"x\n#in"\n#"\r\n2,3\n"#q",4\n#end "'
    _same_at_every_cut(tmp_path / "f.csv", data, ReadOptions(comment="#"), 3)
    # the physical lines, comment lines too, whatever blocks hold only comment lines
    whole = _read(tmp_path / "f.csv", [SourceTask(f"file://{tmp_path / 'f.csv'}", "csv")],
                  ReadOptions(comment="#"), block_bytes=4)
    assert whole[-1] == (len(data), 0, ("lines", 8))
    assert [r[2] for r in whole[:-1]] == ["a,b", '1,"x\n#in"', "2,3", '"#q",4']


def test_every_cut_in_a_single_byte_encoding(tmp_path: Path) -> None:
    """ISO-8859-1: every byte a character (é is one byte, 0xE9), a byte order mark of
    UTF-8 none; quoted newlines and an empty line."""
    data = 'a,b\n1,"caf\xe9\n\xe9t\xe9"\n\n2,\xff\r\n"\xe9",3\n'.encode("latin-1")
    _same_at_every_cut(tmp_path / "f.csv", data, ReadOptions(encoding="iso-8859-1"), 3)


@pytest.mark.parametrize("sep, data", [
    ("\r", b'a,b\r1,"x\r\ny"\r2,p\nq\r\r"\n",3\r4,"open\r'),
    ("\r\n", b'a,b\r\n1,"x\r\ny"\r\n2,p\nq\rr\r\n\r\n"\r",3\r\n4,x\r'),
    ("\n", b'a,b\r\n1,"x\ny"\n2,p\rq\n\n"\r\n",3\r\n4,x'),
    (";", b'a,b;1,"x;\ny";2,p\nq;;"\r;",3;4,"z'),
])
def test_every_cut_with_a_line_separator_of_its_own(tmp_path: Path, sep: str,
                                                    data: bytes) -> None:
    """Spark's lineSep: only that separator ends a record (a CR, an LF or a CRLF is text
    elsewhere, quoted or not); ranges cut anywhere, a CRLF separator cut in two too."""
    _same_at_every_cut(tmp_path / "f.csv", data, ReadOptions(line_sep=sep), 3)


def test_a_line_separator_of_its_own_splits_the_ingest(tmp_path: Path) -> None:
    """A file with lineSep read in ranges of a few bytes: the rows and error records of the
    file read whole, records with line breaks that are text among them."""
    from markerstore import config

    body = "".join(f'{i},"v\r{i}\n";{i},w\n{i};' for i in range(1, 30))
    data = ("id,s;" + body + '99,"never closed').encode()
    options = {config.INGEST_CSV_LINE_SEP: ";"}
    (tmp_path / "s.csv").write_bytes(data)
    assert len(list_tasks(str(tmp_path / "s.csv"), split_bytes=16)) > 20
    rows, errors = run(tmp_path / "s.csv", data, "id BIGINT, s STRING", split_bytes=16,
                       options=options)
    whole_rows, whole_errors = run(tmp_path / "w.csv", data, "id BIGINT, s STRING",
                                   options=options)
    assert rows == whole_rows and len(rows) == 58
    assert [e["record"] for e in errors] == [e["record"] for e in whole_errors]
    assert len(errors) == 1 and {r["s"] for r in rows} >= {"v\r1\n", "w\n1"}


def test_every_cut_with_another_separator(tmp_path: Path) -> None:
    data = 'a;b\n1;"x;\ny"\n2,"3";"é\n\n";\n'.encode()
    _same_at_every_cut(tmp_path / "f.csv", data, ReadOptions(delimiter=";"), 3)


_PLAIN = st.text(alphabet="ab1 é日", max_size=4)
_QUOTED = st.text(alphabet='ab,\n\r"é \\', max_size=6).map(
    lambda t: '"' + t.replace('"', '""') + '"')
_RECORD = st.lists(st.one_of(_PLAIN, _QUOTED), min_size=1, max_size=4).map(",".join)
_LINE_END = st.sampled_from(["\n", "\r\n"])


_COMMENT = st.text(alphabet='ab"\\ ,é', max_size=6).map(lambda t: "#" + t)


@st.composite
def csv_files(draw: Any) -> tuple[bytes, str | None]:
    """A CSV file and its lineSep: records with quoted newlines, doubled quotes, CRLF,
    empty lines, multi-byte UTF-8, lines that start with ``#`` (comment lines where that
    is the comment character, quotes in them unread; a line inside a quoted field when
    one is open); maybe a BOM, a stray quote, a quote never closed at the end. With a
    lineSep of its own (a CR, a CRLF, ``;``), that ends the records, and the LF and CR in
    them are text."""
    sep = draw(st.sampled_from([None, None, "\r", "\r\n", ";"]))
    ends = _LINE_END if sep is None else st.just(sep)
    parts = ["\ufeff" if draw(st.booleans()) else ""]
    for _ in range(draw(st.integers(1, 8))):
        record = "" if draw(st.integers(0, 6)) == 0 else draw(_RECORD)
        if draw(st.integers(0, 5)) == 0:
            record = draw(_COMMENT)
        if draw(st.integers(0, 9)) == 0:
            record += 'x"y'  # a quote inside a plain field: an ordinary character
        parts.append(record + draw(ends))
    if draw(st.booleans()):
        parts.append('9,"never closed' + draw(ends) + draw(_RECORD) + draw(ends))
    if draw(st.booleans()):  # no line end at the file's end
        parts[-1] = parts[-1].rstrip("\r\n") if sep is None else parts[-1][:-len(sep)]
    return "".join(parts).encode(), sep


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(file=csv_files(), cuts=st.lists(st.floats(0, 1), min_size=1, max_size=4),
       block=st.sampled_from([3, 16, 1 << 16]), escape=st.sampled_from(['"', "\\"]),
       comment=st.sampled_from(["", "#"]), driver=st.booleans())
def test_generated_csv_cut_into_two_to_five_ranges(
        tmp_path: Path, file: tuple[bytes, str | None], cuts: list[float], block: int,
        escape: str, comment: str, driver: bool) -> None:
    """With the backslash as the escape, the generated `""` close and reopen fields and
    a backslash before a line break keeps it in the field: other states at the cuts.
    With ``#`` as the comment character, a line that starts with it outside a quoted
    field is no record and its quotes open nothing."""
    data, sep = file
    path = tmp_path / "g.csv"
    path.write_bytes(data)
    url = f"file://{path}"
    points = [p for p in (int(c * len(data)) for c in cuts) if 0 < p < len(data)]
    options = ReadOptions(escape=escape, comment=comment, line_sep=sep)
    whole = _read(path, [SourceTask(url, "csv")], options, block)
    assert _read(path, _ranges(url, points), options, block, driver) == whole


@pytest.mark.parametrize("split", [7, 23, 64])
def test_the_task_path_in_ranges_gives_the_rows_and_errors_of_the_whole_file(
        tmp_path: Path, split: int) -> None:
    """Through IngestTask: the header dropped once, the same rows, the same error records
    (reason, offset, record), and source records = rows + error records."""
    body = "".join(f'{i},"l{i}\nm,""{i}""",{i * 3}\n' if i % 3 else f"{i},bad\n"
                   for i in range(1, 12))
    data = ("a,b,c\n" + body + '12,"never\n13,1,2\n').encode()
    ddl = "a BIGINT, b STRING, c BIGINT"
    (tmp_path / "s.csv").write_bytes(data)
    assert len(list_tasks(str(tmp_path / "s.csv"), split_bytes=split)) > 2
    counts: dict[str, int] = {}
    rows, errors = run(tmp_path / "s.csv", data, ddl, split_bytes=split, counts=counts)
    whole_rows, whole_errors = run(tmp_path / "w.csv", data, ddl)
    assert rows == whole_rows and len(rows) == 8

    def key(e: dict[str, Any]) -> tuple[str, str, str]:
        return e["context"]["reason"], e["context"]["sourceOffset"], e["record"]

    assert sorted(map(key, errors)) == sorted(map(key, whole_errors))
    assert counts["records"] == len(rows) + len(errors) == 12


@pytest.mark.parametrize("split", [9, 31])
def test_comment_lines_in_ranges_through_the_task_path(tmp_path: Path, split: int) -> None:
    """`comment` in byte ranges: a comment line before the header and between records
    (quotes in it open nothing), a line starting with the comment character inside a
    quoted field (text of the field); the rows of the file read whole, no error."""
    from markerstore import config

    body = "".join(f'#note "{i}\n{i},"l{i}\n#m",{i * 3}\n' for i in range(1, 10))
    data = ("#top\na,b,c\n" + body).encode()
    ddl = "a BIGINT, b STRING, c BIGINT"
    options = {config.INGEST_CSV_COMMENT: "#"}
    (tmp_path / "s.csv").write_bytes(data)
    assert len(list_tasks(str(tmp_path / "s.csv"), split_bytes=split)) > 2
    rows, errors = run(tmp_path / "s.csv", data, ddl, split_bytes=split, options=options)
    whole_rows, whole_errors = run(tmp_path / "w.csv", data, ddl, options=options)
    assert errors == whole_errors == []
    assert rows == whole_rows
    assert sorted(r["b"] for r in rows) == sorted(f"l{i}\n#m" for i in range(1, 10))


@pytest.mark.parametrize("comment", ["", "#"])
@pytest.mark.parametrize("split", [3, 8, 20])
@pytest.mark.parametrize("driver", [True, False])
def test_the_header_after_ranges_of_empty_lines_is_dropped_once(
        tmp_path: Path, split: int, comment: str, driver: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranges smaller than the empty lines (and comment lines) before the header: the
    range the header starts in drops it, the ranges before it read no record. Told by
    the driver which range that is, no range reads the file's start to learn it (the
    lookup fails here); not told, each later range looks it up."""
    from markerstore import config
    from markerstore.ingest import header

    lead = "\r\n\n\r" * 4 + ("#x,y\n\n" if comment else "")
    data = ("\ufeff" + lead + "a,b\n1,x\n\n2,y\n3,z\n").encode()
    options = {config.INGEST_CSV_COMMENT: comment} if comment else None
    (tmp_path / "s.csv").write_bytes(data)
    assert len(list_tasks(str(tmp_path / "s.csv"), split_bytes=split)) >= 2
    looked_up = []
    if driver:
        monkeypatch.setattr(header, "header_start", lambda *a: looked_up.append(a) / 0)
    counts: dict[str, int] = {}
    rows, errors = run(tmp_path / "s.csv", data, "a BIGINT, b STRING", split_bytes=split,
                       options=options, counts=counts, driver_header=driver)
    assert errors == [] and looked_up == []
    assert rows == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}, {"a": 3, "b": "z"}]
    assert counts["records"] == 3


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The byte spans read from local files from now on."""
    spans: list[tuple[int, int]] = []
    read = local.LocalFileOpener.read

    def counting(self: Any, *args: Any) -> bytes:
        at = self.tell()
        out = read(self, *args)
        spans.append((at, at + len(out)))
        return out

    monkeypatch.setattr(local.LocalFileOpener, "read", counting)
    return spans


def test_a_quote_never_closed_is_one_error_record_that_later_ranges_skip(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ranges of 300 bytes and a limit of 200: the record whose quote never closes runs
    to the file's end, as in the file read whole: one error record of its true size, and
    no row from inside it (before, the ranges after the limit read its lines as rows).
    The range it starts in reads it through; each later range reads only its own bytes
    (and one read past them), whether the driver gave it its state or not."""
    limit, split = 200, 300
    data = ("a,b\n1,2\n" + '3,"never closed\n' + "".join(f"{i},x\n" for i in range(400))
            ).encode()
    path = tmp_path / "u.csv"
    path.write_bytes(data)
    options = ReadOptions(max_record_bytes=limit)
    offset = data.index(b'3,"never')
    for driver in (False, True):
        tasks = list_tasks(str(path), split_bytes=split)
        if driver:
            tasks = quote_states(tasks, None, options)
        spans = _reads(monkeypatch)
        for task in tasks[1:]:
            spans.clear()
            list(read_blocks(task, None, 64, options))
            if driver:  # no look-back: from its start to one read past its end
                assert min(a for a, _ in spans) >= task.start - 2, task
            assert max(b for _, b in spans) <= (task.end or len(data)) + 64, task
        monkeypatch.undo()
        found = _read(path, tasks, options)[:-1]
        assert found == [(0, 1, "a,b"), (4, 2, "1,2"),
                         (offset, 3, ("size", len(data) - offset - 1))]


def test_the_look_back_decides_within_its_window_or_says_it_cannot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A quoted field spanning 40 quote-free lines: a line start inside it is inside, and
    one after it outside, from a window that reaches the field's quotes; a window that
    holds no quote cannot tell (None: the first pass decides), and the exact state is
    found all the same (from the file's start)."""
    lines = "".join(f"line {i}\n" for i in range(40))
    data = ("a,b\n" + '1,"' + lines + '",2\n3,4\n').encode()
    path = tmp_path / "f.csv"
    path.write_bytes(data)
    inside = data.index(b"line 20")
    after = data.index(b"3,4")
    with open(path, "rb") as handle:
        assert inside_at(handle, inside)
        assert not inside_at(handle, after)
        monkeypatch.setattr(csvranges, "LOOK_BACK_BYTES", 16)
        monkeypatch.setattr(csvranges, "LOOK_BACK_MAX", 64)
        assert inside_at(handle, inside) is None  # 64 bytes of "line ..." tell nothing
        assert not inside_at(handle, after)  # the closing quote's line decides
        assert csvranges.state_at(handle, inside, 16)


@pytest.mark.spark
def test_ingest_through_spark_with_quoted_newlines_across_real_splits(spark: Any,
                                                                      tmp_path: Path) -> None:
    """A file of 600-byte splits whose quoted newlines lie on their first line starts: every
    record once, the bad ones as error records, records = rows + error records."""
    import pyarrow.parquet as pq

    from markerstore import config
    from markerstore.ingest.pipeline import ingest

    body = "".join(f'{i},"note {i}\nline two, ""q""\r\nend",{i * 2}\n' if i % 10 else
                   f'{i},"bad\n{i}",x\n' for i in range(1, 301))
    data = ("id,note,n\n" + body).encode()
    path = tmp_path / "big.csv"
    path.write_bytes(data)
    split = 600
    tasks = list_tasks(str(path), split_bytes=split)
    whole = _read(path, [SourceTask(f"file://{path}", "csv")], ReadOptions())
    starts = {offset for offset, _, _ in whole[:-1]}
    inside = [t for t in tasks if t.start and _first_line_start(data, t.start) not in starts]
    assert len(tasks) > 10 and len(inside) > 2  # line starts inside quoted fields
    url = str(tmp_path / "t")
    result = ingest(str(path), url, schema="id BIGINT, note STRING, n BIGINT", spark=spark,
                    progress=False, markers="direct",
                    options={config.INGEST_SPLIT_BYTES: str(split)})
    files = [str(f) for f in Path(url).rglob("*.parquet") if "/." not in str(f)]
    rows = pq.read_table(files).to_pylist()
    good = [i for i in range(1, 301) if i % 10]
    assert sorted(r["id"] for r in rows) == good
    assert all(r["note"] == f'note {r["id"]}\nline two, "q"\r\nend' and r["n"] == 2 * r["id"]
               for r in rows)
    assert sum(result.error_records.values()) == 30
    assert result.source_lines == data.count(b"\n")  # every line counted once
    assert result.source_tasks == len(tasks)
    assert result.source_records == len(rows) + sum(result.error_records.values()) == 300


def test_a_field_longer_than_the_limit_that_closed_before_a_range_is_read_exactly(
        tmp_path: Path) -> None:
    """A quoted field of 150 quote-free bytes closed by a line of a lone quote (a line
    that flips the state), then records: ranges cut after it, within the limit of 100
    bytes, read its records as the whole file does (the look-back widens past the limit
    where its window holds a quote)."""
    data = ("a,b\n" + "x,y\n" * 50 + '1,"' + "body\n" * 30 + '"\n'
            + "".join(f"{i},v\n" for i in range(30))).encode()
    path = tmp_path / "q.csv"
    path.write_bytes(data)
    url = f"file://{path}"
    options = ReadOptions(max_record_bytes=100)
    whole = _read(path, [SourceTask(url, "csv")], options)
    closed = data.index(b'"\n0,v') + 2
    for cut in range(closed, len(data)):
        assert _read(path, _ranges(url, [cut]), options) == whole, cut


def test_one_large_file_is_cut_into_two_ranges_per_core_unless_a_split_is_given() -> None:
    from markerstore import config
    from markerstore.ingest.pipeline import MIN_SPLIT_BYTES, balanced

    size = 184_000_000
    tasks = list_tasks_of(size)
    assert [t.size for t in tasks] == [64 << 20, 64 << 20, size - (128 << 20)]
    even = balanced(tasks, 2, config.resolve({}))
    assert [t.size for t in even] == [46_000_000] * 4  # two a core: both busy to the end
    assert [t.start for t in even] == [0, 46_000_000, 92_000_000, 138_000_000]
    assert even[-1].end is None and all(t.end == t.start + t.size for t in even[:-1])
    given = config.resolve({config.INGEST_SPLIT_BYTES: str(64 << 20)})
    assert balanced(tasks, 2, given) == tasks
    many = balanced(tasks, 64, config.resolve({}))  # as many as the file has 16 MiB
    assert len(many) == size // MIN_SPLIT_BYTES and min(t.size for t in many) >= MIN_SPLIT_BYTES
    small = [SourceTask(f"file:///s/{i}.csv", "csv", size=1000) for i in range(3)]
    assert balanced(small, 2, config.resolve({})) == small  # whole files stay whole


def list_tasks_of(size: int) -> list[SourceTask]:
    from markerstore.ingest.sources import recut

    return recut([SourceTask("file:///big.csv", "csv", 0, 1, size=size, splittable=True)],
                 64 << 20)
