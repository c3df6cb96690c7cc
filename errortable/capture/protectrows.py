"""The error records of records that failed to parse, under a PII policy, as columns.

Under ``payload.drop`` or ``payload.redact`` the record of a line that did not parse is
its raw text, which cannot be redacted: the record is dropped, the message is the
failure's safe text (or withheld), and every spelling of the text is swept out of the
message and of the context values that copy data (:mod:`errortable.capture.pii`). Those are the
same for every row of one failure, except the sweep, which changes a row only where a
spelling of its text (of 4 characters or more) is inside the message or one of those
context values. Which rows that is, is decided on the column for texts whose only
spelling is themselves (printable ASCII, no quote, apostrophe or backslash, single
spaces): whether the text is one of the substrings of those few values. The others are
decided a distinct text at a time. A row the sweep changes is built one by one, as
before; every other row as columns.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from errortable import schema as S
from errortable.capture import records as R
from errortable.capture.errorrows import (
    PARSE_KEYS,
    Column,
    ParseFailures,
    interleave_map,
    parse_fingerprint,
    repeated,
)
from errortable.capture.pii import SWEEP_MIN_CHARS, WITHHELD, spellings

# Keys a base context may not hold for the columns to be the records the builder makes:
# the builder sets them itself, or the policy rewrites them.
_BUILDER_KEYS = PARSE_KEYS | {R.PAYLOAD, R.REDACTED_FIELDS, R.RECORD_KEY, R.PARTITION_PATH,
                               R.COLUMN}
_ONE_SPELLING = r"^[\x21\x23-\x26\x28-\x5b\x5d-\x7e]+(?: [\x21\x23-\x26\x28-\x5b\x5d-\x7e]+)*$"


@functools.lru_cache(maxsize=32)
def _pieces(targets: tuple[str, ...]) -> pa.Array:
    """Every substring of `targets` of SWEEP_MIN_CHARS characters or more."""
    found = {t[i:j] for t in targets for i in range(len(t))
             for j in range(i + SWEEP_MIN_CHARS, len(t) + 1)}
    return pa.array(sorted(found), pa.string())


def swept_rows(texts: pa.Array, targets: tuple[str, ...]) -> np.ndarray:
    """Which texts have a spelling (pii.spellings) inside one of `targets`."""
    n = len(texts)
    if n == 0 or not targets:
        return np.zeros(n, bool)
    long = np.asarray(pc.greater_equal(pc.utf8_length(texts), SWEEP_MIN_CHARS)
                      .to_numpy(zero_copy_only=False), bool)
    single = np.asarray(pc.fill_null(pc.match_substring_regex(texts, _ONE_SPELLING), False)
                        .to_numpy(zero_copy_only=False), bool)
    inside = np.asarray(pc.is_in(texts, value_set=_pieces(targets))
                        .to_numpy(zero_copy_only=False), bool)
    swept = long & single & inside
    others = np.flatnonzero(long & ~single)
    if len(others):
        encoded = texts.take(pa.array(others)).dictionary_encode()
        hit = np.array([any(form in target for form in spellings(text) for target in targets)
                        for text in encoded.dictionary.to_pylist()], bool)
        swept[others] = hit[encoded.indices.to_numpy(zero_copy_only=False)]
    return swept


def protected_parse_table(builder: R.RecordBuilder, base: Mapping[str, str],
                          found: ParseFailures,
                          one_by_one: Callable[[list[int]], list[dict[str, Any]]]
                          ) -> pa.Table | None:
    """The records ``errortable.capture.parsing.failure_record`` builds for `found` under the
    builder's PII policy, as columns but the rows the sweep changes, which
    `one_by_one(rows)` builds; None where the columns would not be those records (a base
    key the builder sets or the policy rewrites, extra context entries, no safe texts)."""
    if not builder.protects or _BUILDER_KEYS & set(base) or found.extra or \
            found.safe is None:
        return None
    k = len(found.lines)
    if k == 0:
        return S.empty_table()
    config = builder.config
    shown = [WITHHELD if s is None else s for s in found.safe]
    copied = tuple(v for key, v in base.items() if key not in R.GENERATED_KEYS)
    swept = swept_rows(found.texts, tuple(dict.fromkeys(copied + tuple(shown))))
    keep = np.flatnonzero(~swept)
    kinds = found.kinds.to_numpy(zero_copy_only=False)[keep]
    at = pa.array(keep, pa.int64())
    n = len(keep)
    payload = "dropped" if config.drop_payload else "dropped: raw text cannot be redacted"
    slots: list[tuple[Column, Column]] = list(base.items())
    slots += [(R.SOURCE_LINE, pc.cast(found.lines.take(at), pa.string())),
              (R.SOURCE_OFFSET, pc.cast(found.offsets.take(at), pa.string())),
              (R.PAYLOAD, payload), (R.REASON, (pa.array(found.reasons, pa.string()), kinds)),
              (R.ERROR_CLASS, (pa.array(found.classes, pa.string()), kinds)),
              (R.FINGERPRINT, (pa.array([parse_fingerprint(r, c, s or "") for r, c, s in zip(
                  found.reasons, found.classes, found.safe, strict=True)], pa.string()), kinds))]
    if config.redact:
        slots.append((R.REDACTED_FIELDS, ",".join(config.redact)))
    messages = pa.array([R.format_message(c, t, None, config.stacktrace_max_chars)
                         for c, t in zip(found.classes, shown, strict=True)], pa.string())
    table = pa.Table.from_arrays([
        builder.uid.array(n), repeated(R.now_ts(), n), found.schemas.take(at),
        pa.nulls(n, pa.string()), messages.take(pa.array(kinds)),
        interleave_map(n, slots)], schema=S.arrow_schema())
    rest = np.flatnonzero(swept)
    if len(rest) == 0:
        return table
    built = S.records_to_arrow(one_by_one(rest.tolist()))
    order = np.empty(k, np.int64)  # the rows back in their order
    order[np.concatenate([keep, rest])] = np.arange(k)
    return pa.concat_tables([table, built]).take(pa.array(order))
