"""``nrp review PROJECT_FILE`` in a subprocess on a free loopback port, with known tokens.

``nrp serve`` for the scope tests is the service tests' ``Server`` (``tests/service``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
from service_helpers import ADMIN_TOKEN, READ_TOKEN, Server, free_port, write_config

import nrp

__all__ = ["ADMIN_TOKEN", "READ_TOKEN", "TOKENS", "ReviewServer", "Server", "write_config"]

#: reviewer -> token (each at least 16 characters, as the tokens file asks)
TOKENS = {name: f"{name}-token-0123456789abcdef" for name in ("alice", "bob", "carol")}


def write_tokens(path: Path, admin: bool = False) -> Path:
    lines = [f"review/{name} {token}" for name, token in TOKENS.items()]
    if admin:
        lines += [f"admin {ADMIN_TOKEN}", f"read {READ_TOKEN}"]
    path.write_text("\n".join(lines) + "\n")
    return path


class ReviewServer:
    """The review app alone (``nrp review``), started and killed like a user would."""

    def __init__(self, project: Path, log: Path, tokens_file: bool = True):
        self.project, self.log = project, log
        # without a tokens file, nrp review makes a token per reviewer and prints login links
        self.tokens = write_tokens(project.with_name("review-tokens.txt")) if tokens_file else None
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 120) -> ReviewServer:
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(Path(nrp.__file__).parents[1]), env.get("PYTHONPATH")])
        )
        command = [sys.executable, "-m", "nrp", "review", str(self.project), "--port",
                   str(self.port)]  # fmt: skip
        if self.tokens is not None:
            command += ["--tokens-file", str(self.tokens)]
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"review app exited: {self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/review/", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"review app not ready: {self.log.read_text()[-3000:]}")

    def client(self, reviewer: str) -> httpx.Client:
        headers = {"Authorization": f"Bearer {TOKENS[reviewer]}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
