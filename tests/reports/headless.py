"""Headless Chromium for the report tests: a screenshot, and the page's console errors.

Two ways, both with the flags the tests need offline (no network, no first-run, no sync):

- ``screenshot(chromium, url, png)``: Chromium's own ``--screenshot`` (what a person would type);
- ``inspect_page(chromium, url, png)``: a small DevTools-protocol client over
  ``--remote-debugging-pipe`` that loads the page, collects every console message, uncaught
  exception and browser log entry (a missing image is a ``Log.entryAdded`` error "Failed to
  load resource"), lists images that did not load, measures what sticks out of the viewport
  (``WIDE_ELEMENTS``) and takes a screenshot.

Why the pipe and not ``--enable-logging=stderr``: the log prints console messages without their
level and does not mention resources that failed to load; and why not the WebSocket endpoint:
the pipe needs no free port and no websocket library (none is installed). The protocol over the
pipe is JSON messages separated by NUL bytes: Chromium reads commands on fd 3 and writes on
fd 4. The child's fds are set by ``bash`` redirections (``3<&A 4>&B``) because Debian's
``chromium`` is a shell script that ``exec``s the browser and keeps open fds, and ``bash``
(unlike ``dash``) accepts fd numbers above 9.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


#: what sticks out at the page's width: the viewport's width, the page's scroll width, and each
#: element whose box passes the viewport's right edge or whose content is wider than its box
#: (a table cut off inside a scrolling container)
WIDE_ELEMENTS = """(() => {
  const width = document.documentElement.clientWidth;
  const name = e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") +
    (typeof e.className === "string" && e.className ? "." + e.className : "");
  const wide = [];
  for (const e of document.querySelectorAll("body *")) {
    const box = e.getBoundingClientRect();
    if (box.width === 0 && box.height === 0) continue;
    if (box.right > width + 0.5 || box.left < -0.5)
      wide.push(name(e) + " right " + Math.round(box.right));
    else if (getComputedStyle(e).overflowX !== "visible" && e.scrollWidth > e.clientWidth + 1)
      wide.push(name(e) + " content " + e.scrollWidth + " > " + e.clientWidth);
    if (wide.length >= 20) break;
  }
  return {viewport: width, page: document.documentElement.scrollWidth, wide: wide};
})()"""


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def screenshot(
    chromium: str, url: str, png: Path, profile: Path, size: str = "1280,2000", timeout: int = 120
) -> subprocess.CompletedProcess:
    """Chromium's ``--screenshot`` of ``url`` into ``png``."""
    return subprocess.run(
        [chromium, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}",
         f"--window-size={size}", url],
        capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@dataclass
class PageReport:
    console: list[dict[str, Any]] = field(default_factory=list)  # every console API call
    exceptions: list[str] = field(default_factory=list)  # uncaught exceptions
    log: list[dict[str, Any]] = field(default_factory=list)  # browser log entries
    broken_images: list[str] = field(default_factory=list)
    images: int = 0
    title: str = ""
    width: dict[str, Any] = field(default_factory=dict)  # WIDE_ELEMENTS' answer

    def errors(self) -> list[str]:
        """Console errors and assertions, uncaught exceptions, error log entries."""
        found = [
            f"console.{c['type']}: " + " ".join(_argument(a) for a in c.get("args", []))
            for c in self.console
            if c.get("type") in ("error", "assert")
        ]
        found += [f"exception: {e}" for e in self.exceptions]
        found += [
            f"log {e.get('source')}: {e.get('text')} {e.get('url', '')}".strip()
            for e in self.log
            if e.get("level") == "error"
        ]
        return found


def _argument(remote_object: dict[str, Any]) -> str:
    return str(remote_object.get("value", remote_object.get("description", "")))


class _Pipe:
    def __init__(self, read_fd: int, write_fd: int, timeout: float):
        self.read_fd, self.write_fd, self.timeout = read_fd, write_fd, timeout
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        return self.next_id

    def wait_for(self, matches) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "id" not in message:
                    self.events.append(message)
                if matches(message):
                    return message
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from chromium")
            ready, _, _ = select.select([self.read_fd], [], [], left)
            if ready:
                chunk = os.read(self.read_fd, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe")
                self.buffer += chunk

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        sent = self.send(method, params, session)
        answer = self.wait_for(lambda m: m.get("id") == sent)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]


def start_chromium(chromium: str, profile: Path) -> tuple[subprocess.Popen, int, int]:
    """Headless Chromium with its DevTools pipe on fds 3 and 4: the process and our reading
    and writing ends."""
    ours_read, chrome_write = os.pipe()
    chrome_read, ours_write = os.pipe()
    # the child's ends above fd 9, so that the redirections onto 3 and 4 cannot clobber them
    a = fcntl.fcntl(chrome_read, fcntl.F_DUPFD_CLOEXEC, 10)
    b = fcntl.fcntl(chrome_write, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(chrome_read)
    os.close(chrome_write)
    command = f'exec "$0" "$@" 3<&{a} 4>&{b} {a}<&- {b}>&-'
    process = subprocess.Popen(
        ["bash", "-c", command, chromium, *FLAGS, f"--user-data-dir={profile}",
         "--remote-debugging-pipe", "about:blank"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        pass_fds=(a, b),
    )  # fmt: skip
    os.close(a)
    os.close(b)
    return process, ours_read, ours_write


def inspect_page(
    chromium: str,
    url: str,
    png: Path,
    profile: Path,
    width: int = 1280,
    height: int = 2000,
    timeout: float = 120,
) -> PageReport:
    """Load ``url`` in headless Chromium over the DevTools pipe; report what the console and
    the browser log said and which images failed, and save a full-page screenshot."""
    process, ours_read, ours_write = start_chromium(chromium, profile)
    pipe = _Pipe(ours_read, ours_write, timeout)
    report = PageReport()
    try:
        target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for method in ("Page.enable", "Runtime.enable", "Log.enable"):
            pipe.call(method, session=session)
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        pipe.call("Emulation.setDeviceMetricsOverride", metrics, session)
        pipe.call("Page.navigate", {"url": url}, session)
        pipe.wait_for(lambda m: m.get("method") == "Page.loadEventFired")
        state = pipe.call(
            "Runtime.evaluate",
            {
                "expression": "({title: document.title, images: document.images.length, "
                "broken: Array.from(document.images).filter(i => !i.complete || "
                "i.naturalWidth === 0).map(i => i.src)})",
                "returnByValue": True,
            },
            session,
        )["result"]["value"]
        shot = pipe.call(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session
        )
        png.write_bytes(base64.b64decode(shot["data"]))
        report.width = pipe.call(
            "Runtime.evaluate", {"expression": WIDE_ELEMENTS, "returnByValue": True}, session
        )["result"]["value"]
        report.title, report.images = state["title"], state["images"]
        report.broken_images = list(state["broken"])
        with contextlib.suppress(RuntimeError, TimeoutError):  # it may close before answering
            pipe.call("Browser.close")
    finally:
        os.close(ours_read)
        os.close(ours_write)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for event in pipe.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled":
            report.console.append(params)
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            description = details.get("exception", {}).get("description") or details.get("text")
            report.exceptions.append(str(description))
        elif method == "Log.entryAdded":
            report.log.append(params.get("entry", {}))
    return report
