"""`markerstore serve --token ...` put the token in `ps` for every user: the token can come
from a file (`--token-file`, warned about when others can read it) or the environment
($MARKERSTORE_SERVER_TOKEN), and then no process listing shows it (docs/SECURITY.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from markerstore import Table, config
from markerstore.cli import cli

TOKEN = "s3cr3t-Token-4242"


def _status(url: str, token: str | None) -> int:
    request = urllib.request.Request(url + "/v1/markers/20260101000000000/exists",
                                     headers={"Authorization": f"Bearer {token}"}
                                     if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture
def table(tmp_path: Path) -> str:
    path = str(tmp_path / "t")
    Table(path).start_commit(heartbeat=False)
    return path


def _serve(args: list[str], env: dict[str, str], stderr: list[str] | None = None
           ) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The server process and its URL (once); after it stops, its stderr into `stderr`."""
    process = subprocess.Popen([sys.executable, "-m", "markerstore.cli", "serve", *args,
                                "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
    try:
        assert process.stdout is not None and process.stderr is not None
        text = ""
        while True:  # the JSON of the server's URL, over a few lines
            line = process.stdout.readline()
            assert line, process.stderr.read()
            text += line
            if line.startswith("}"):
                break
        yield process, json.loads(text)["url"]
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
        if stderr is not None:
            stderr.append(err)


@pytest.mark.parametrize("source", ["file", "environment"])
def test_the_token_is_in_no_process_listing(tmp_path: Path, table: str, source: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != config.SERVER_TOKEN_ENV}
    args = ["--table", table]
    if source == "file":
        secret = tmp_path / "token"
        secret.write_text(TOKEN + "\n")
        secret.chmod(0o600)
        args += ["--token-file", str(secret)]
    else:
        env[config.SERVER_TOKEN_ENV] = TOKEN
    for process, url in _serve(args, env):
        listing = Path(f"/proc/{process.pid}/cmdline").read_bytes()
        assert TOKEN.encode() not in listing
        assert _status(url, None) == 401 and _status(url, "wrong") == 401
        assert _status(url, TOKEN) == 200


def test_a_token_file_others_can_read_is_warned_about(tmp_path: Path, table: str) -> None:
    secret = tmp_path / "token"
    secret.write_text(TOKEN)
    secret.chmod(0o644)
    env = {k: v for k, v in os.environ.items() if k != config.SERVER_TOKEN_ENV}
    stderr: list[str] = []
    for _, url in _serve(["--table", table, "--token-file", str(secret)], env, stderr):
        assert _status(url, TOKEN) == 200
    warning = stderr[0]
    assert "can be read by other users (mode 644)" in warning and TOKEN not in warning


@pytest.mark.parametrize(("args", "message"), [
    (["--token", TOKEN, "--token-file", "{file}"], "give the token once"),
    (["--token-file", "{missing}"], "cannot read the token"),
    (["--token-file", "{empty}"], "token is empty"),
])
def test_a_bad_token_source_is_one_line_and_exit_2(tmp_path: Path, table: str,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   args: list[str], message: str) -> None:
    monkeypatch.delenv(config.SERVER_TOKEN_ENV, raising=False)
    (tmp_path / "file").write_text(TOKEN)
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "empty").chmod(0o600)
    paths = {k: str(tmp_path / k) for k in ("file", "missing", "empty")}
    result = CliRunner().invoke(cli, ["serve", "--table", table,
                                      *[a.format(**paths) for a in args]])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and TOKEN not in lines[0]


def test_help_names_the_file_and_the_environment() -> None:
    text = CliRunner().invoke(cli, ["serve", "--help"]).output
    assert "--token-file" in text and config.SERVER_TOKEN_ENV in " ".join(text.split())
