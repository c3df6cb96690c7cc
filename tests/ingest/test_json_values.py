"""The JSON values counted per line (commas and opening brackets, plus one), which bound
what DuckDB's parser is given at a time: the vectorized count equals the count of the
text, for any lines, sliced arrays and nulls included."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from markerstore.ingest.parse import json_values

_TEXT = st.text(alphabet=st.sampled_from(list(',[{}]":ab1 é\n')), max_size=30)


@given(st.lists(st.one_of(st.none(), _TEXT), max_size=30), st.integers(0, 3),
       st.sampled_from([pa.string(), pa.large_string()]))
def test_values_per_line_are_the_marks_of_each_line_plus_one(
        lines: list[str | None], cut: int, kind: pa.DataType) -> None:
    array = pa.array(lines, kind).slice(min(cut, len(lines)))
    expected = [1 + (0 if t is None else sum(t.count(m) for m in ",[{"))
                for t in array.to_pylist()]
    assert json_values(array).tolist() == expected
    assert json_values(array).dtype == np.int64
