"""A generated sample for the demo, notebook and tests: JSON lines, about 1% bad.

Bad rows come in kinds the error table captures: malformed JSON, a value of the wrong
type, a null key, and a row failing a check (`amount >= 0`, `currency IN (...)`).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import fsspec

SCHEMA_DDL = ("event_id BIGINT, user_id BIGINT, amount DOUBLE, currency STRING, "
              "event_time TIMESTAMP, day STRING")
CHECKS = {"non_negative_amount": "amount >= 0",
          "known_currency": "currency IN ('EUR', 'USD', 'GBP')"}
KEY = "event_id"
PARTITION_BY = "day"
CURRENCIES = ("EUR", "USD", "GBP")


@dataclass
class SampleInfo:
    """What was generated: row counts by kind (the demo checks its audit against these)."""

    paths: list[str] = field(default_factory=list)
    rows: int = 0
    bad: dict[str, int] = field(default_factory=dict)

    @property
    def good(self) -> int:
        return self.rows - sum(self.bad.values())


def _good_row(i: int, rng: random.Random, start: datetime) -> dict[str, Any]:
    when = start + timedelta(seconds=rng.randrange(3 * 86400))
    return {"event_id": i, "user_id": rng.randrange(10_000),
            "amount": round(rng.uniform(0, 500), 2), "currency": rng.choice(CURRENCIES),
            "event_time": when.isoformat(), "day": when.strftime("%Y-%m-%d")}


def generate(folder: str, rows: int = 100_000, files: int = 4, bad_fraction: float = 0.01,
             seed: int = 7, storage_options: dict[str, Any] | None = None) -> SampleInfo:
    """Write `rows` JSON lines over `files` files under `folder`."""
    rng = random.Random(seed)
    start = datetime(2026, 11, 19, tzinfo=timezone.utc)
    info = SampleInfo(rows=rows, bad={"parse": 0, "cast": 0, "key": 0, "check": 0})
    kinds = ("parse", "cast", "key", "check")
    per_file = (rows + files - 1) // files
    fs, root = fsspec.core.url_to_fs(folder, **(storage_options or {}))
    fs.makedirs(root, exist_ok=True)
    for number in range(files):
        lines = []
        for i in range(number * per_file, min(rows, (number + 1) * per_file)):
            row = _good_row(i, rng, start)
            if rng.random() < bad_fraction:
                kind = kinds[i % len(kinds)]
                info.bad[kind] += 1
                if kind == "parse":
                    lines.append(json.dumps(row)[:-7] + ",,")  # truncated, malformed
                    continue
                if kind == "cast":
                    row["amount"] = rng.choice(["twelve", "n/a", "1,5"])
                elif kind == "key":
                    row["event_id"] = None
                else:
                    row["amount"] = -row["amount"] - 1
            lines.append(json.dumps(row))
        path = f"{root}/events-{number:03d}.json"
        with fs.open(path, "w") as handle:
            handle.write("\n".join(lines) + "\n")
        info.paths.append(fs.unstrip_protocol(path))
    return info
