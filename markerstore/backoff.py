"""How long to wait before retrying a request that failed for a passing reason.

One rule for every retry loop (storage requests, the marker client, an Iceberg commit that
lost a race): exponential backoff with jitter, so that clients that failed together do not
retry together.
"""

from __future__ import annotations

import math
import random


def backoff(attempt: int, base: float, cap: float = math.inf, full_jitter: bool = False
            ) -> float:
    """Seconds to wait before retry number `attempt` (0 for the first): `base` doubled per
    attempt, times 0.5 to 1.5 at random, or anything from 0 with `full_jitter` (writers
    racing for one commit spread out most); at most `cap`."""
    span = base * 2 ** attempt
    delay = random.uniform(0, span) if full_jitter else span * (0.5 + random.random())
    return min(delay, cap)
