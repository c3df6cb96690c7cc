"""One headless Chromium for the test session (started when a test first asks for it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.browser import Browser, executable


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if executable() is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium; `make setup` "
                    "installs it where it can): the report's browser test is skipped")
    started = Browser.start()
    yield started
    started.close()
