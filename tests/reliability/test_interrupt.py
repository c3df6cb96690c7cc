"""Ctrl-C at any moment of a command prints one line (docs/RELIABILITY.md, "Ctrl-C"):
today the first ~0.7 s of any command, its imports, printed a 12-30 line traceback. The
console scripts are run as pip writes them, from pyproject's [project.scripts], and sent
SIGINT at several moments of their start-up (moments of the process's own CPU time, so
that a loaded machine moves none of them into Python's start-up, before any code of the
project runs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def _script(tmp_path: Path, name: str) -> Path:
    """The console script pip installs for `name` (its entry point from pyproject)."""
    module, function = SCRIPTS[name].split(":")
    path = tmp_path / name
    path.write_text(f"import re\nimport sys\nfrom {module} import {function}\n"
                    f"if __name__ == '__main__':\n    sys.exit({function}())\n")
    return path


def _wait_for_cpu(process: subprocess.Popen[str], seconds: float) -> None:
    """Until `process` has run `seconds` of CPU time (or ended)."""
    ticks = seconds * os.sysconf("SC_CLK_TCK")
    while process.poll() is None:
        try:
            fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return
        if int(fields[11]) + int(fields[12]) >= ticks:  # utime + stime
            return
        time.sleep(0.005)


@pytest.mark.parametrize("name", ["markerstore", "errortable"])
def test_ctrl_c_in_the_start_up_is_one_line(tmp_path: Path, name: str) -> None:
    script = _script(tmp_path, name)
    interrupted = 0
    for delay in (0.15, 0.3, 0.5, 0.8):  # seconds of the command's CPU time
        process = subprocess.Popen([sys.executable, str(script), "--help"], cwd=tmp_path,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   text=True)
        _wait_for_cpu(process, delay)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        assert "Traceback" not in err and len(err.splitlines()) <= 1, (delay, err)
        if process.returncode == 130:
            assert err == f"{name}: interrupted\n", (delay, err)
            interrupted += 1
    assert interrupted  # at least the first signal came before the command started
