"""The console scripts (pyproject's ``[project.scripts]``): Ctrl-C is one line at any
moment.

A command imports click, numpy, pyarrow and fsspec before it starts (most of a second);
Python's own handler would print a traceback for a Ctrl-C in that time. These entry points
take SIGINT before importing anything of the command line: until the command starts,
Ctrl-C prints ``<prog>: interrupted`` and exits 130 at once (nothing has been done yet);
from then on, the command's own handling (one line too, after its clean-up) takes over.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from types import FrameType
from typing import NoReturn

INTERRUPTED = 130  # the shell's exit status for SIGINT


def markerstore() -> None:
    """The `markerstore` command."""
    _run("markerstore", "markerstore.cli.main")


def errortable() -> None:
    """The `errortable` command."""
    _run("errortable", "markerstore.cli.errortable")


def _run(prog: str, module: str) -> None:
    def starting(signum: int, frame: FrameType | None) -> NoReturn:
        os.write(2, f"{prog}: interrupted\n".encode())
        os._exit(INTERRUPTED)

    signal.signal(signal.SIGINT, starting)
    try:
        main = importlib.import_module(module).main
        signal.signal(signal.SIGINT, signal.default_int_handler)
        main()
    except KeyboardInterrupt:  # between the two handlers, or outside the command's own
        print(f"{prog}: interrupted", file=sys.stderr)
        sys.exit(INTERRUPTED)
