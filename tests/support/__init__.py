"""What the tests share, in one importable package (``tests.support.x``): table locations,
marked writes, the commit and error-table write helpers, the two Spark entry points, the
per-record ingest reference, what a table holds read back as a reader reads it
(``readback``: the invariant checks), mutants of the package (``mutants``), the corpus
from the JSON and CSV specifications (``spec_corpus``), and the child processes the crash
tests launch (``python -m tests.support.crash_writer`` ...). Fixtures live in the
conftest.py files."""
