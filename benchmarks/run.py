"""`make bench`: run every benchmark side by side with its baseline, write docs/BENCHMARKS.md.

Each benchmark module has `run(quick: bool) -> str` returning a Markdown section. The
machine is shared and noisy, so every figure is a ratio against a baseline measured in
the same run, with storage request counts where requests are the cost.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

from markerstore._optional import import_optional

MODULES = ("benchmarks.bench_markers", "benchmarks.bench_hudi_scale", "benchmarks.bench_writer",
           "benchmarks.bench_errortable", "benchmarks.bench_source", "benchmarks.bench_verify",
           "benchmarks.bench_scale", "benchmarks.bench_ingest", "benchmarks.bench_csv_split",
           "benchmarks.bench_csv_ranges", "benchmarks.bench_report", "benchmarks.bench_formats",
           "benchmarks.bench_json_file", "benchmarks.bench_ingest_shapes")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--only", action="append", default=[],
                        help="run only modules whose name contains this (repeatable)")
    parser.add_argument("--output", default="docs/BENCHMARKS.md")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sections = []
    failed = False
    for name in MODULES:
        if args.only and not any(part in name for part in args.only):
            continue
        module = import_optional(name)
        if module is None:
            continue
        print(f"== {name}", flush=True)
        started = time.time()
        try:
            sections.append(module.run(quick=args.quick))
        except Exception:
            failed = True
            sections.append(f"## {name}\n\nFailed in this run:\n\n```\n"
                            f"{traceback.format_exc()}```\n")
        print(f"   {time.time() - started:.0f} s", flush=True)
    header = (
        "# Benchmarks\n\n"
        f"Written by `make bench` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.machine()}"
        f"{' (quick sizes)' if args.quick else ''}.\n\n"
        "The machine is shared and noisy: every figure is a ratio against a baseline "
        "measured side by side in the same run, with storage request counts where "
        "requests are the cost.\n\n"
    )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(header + "\n".join(sections))
    print(f"wrote {args.output}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
