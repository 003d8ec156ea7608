"""Headless Chromium driven over the DevTools pipe, for the review app's browser test.

The pipe client and the flags are the report test's (``tests/reports/headless.py``); this adds
what a person does on a page: pages (tabs, each its own sessionStorage, so two reviewers can
work side by side), JavaScript evaluated in the page (``Runtime.evaluate``), real key presses
(``Input.dispatchKeyEvent``) and clicks (``Input.dispatchMouseEvent``), a real HTML5 drag and
drop (the mouse pressed on a card and moved: Chromium reports the drag it intercepted, which is
then dropped on the target with ``Input.dispatchDragEvent``), and screenshots.
"""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reports"))
from headless import _Pipe, find_chromium, start_chromium

__all__ = ["Browser", "Page", "find_chromium"]

KEYS = {"Enter": ("Enter", 13, "\r")}


class Page:
    def __init__(self, pipe: _Pipe, session: str):
        self.pipe, self.session = pipe, session

    def call(self, method: str, params: dict | None = None) -> dict:
        return self.pipe.call(method, params, self.session)

    def goto(self, url: str) -> None:
        self._forget("Page.loadEventFired")
        self.call("Page.navigate", {"url": url})
        self._event("Page.loadEventFired")

    def reload(self) -> None:
        self._forget("Page.loadEventFired")
        self.call("Page.reload", {"ignoreCache": True})
        self._event("Page.loadEventFired")

    def _forget(self, method: str) -> None:
        self.pipe.events = [
            e
            for e in self.pipe.events
            if not (e.get("method") == method and e.get("sessionId") == self.session)
        ]

    def eval(self, expression: str) -> Any:
        answer = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in answer:
            raise RuntimeError(f"{expression}: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30) -> Any:
        """Poll ``expression`` until it is truthy (what a person waits for on the screen)."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.eval(
                f"(() => {{ const v = ({expression}); return v instanceof Node || v; }})()"
            )
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"never true: {expression}")
            time.sleep(0.05)

    def key(self, key: str) -> None:
        name, code, text = KEYS.get(key, (key, ord(key.upper()) if len(key) == 1 else 0, key))
        base = {"key": name, "windowsVirtualKeyCode": code, "code": name}
        self.call("Input.dispatchKeyEvent", {"type": "keyDown", "text": text, **base})
        self.call("Input.dispatchKeyEvent", {"type": "keyUp", **base})

    def center(self, selector: str) -> tuple[float, float]:
        box = self.eval(
            f"(() => {{ const e = document.querySelector({selector!r}); e.scrollIntoView("
            "{block: 'center'}); const r = e.getBoundingClientRect(); "
            "return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        return float(box[0]), float(box[1])

    def _event(self, method: str) -> dict[str, Any]:
        """The first ``method`` event of this page, received already or next (events arrive
        while the pipe waits for the answers to commands); taken off the list."""

        def ours(m: dict[str, Any]) -> bool:
            return m.get("method") == method and m.get("sessionId") == self.session

        for event in self.pipe.events:
            if ours(event):
                self.pipe.events.remove(event)
                return event
        event = self.pipe.wait_for(ours)
        self.pipe.events.remove(event)
        return event

    def _mouse(self, kind: str, x: float, y: float, buttons: int = 0) -> None:
        params = {"type": kind, "x": x, "y": y, "button": "left", "buttons": buttons}
        if kind != "mouseMoved":
            params["clickCount"] = 1
        self.call("Input.dispatchMouseEvent", params)

    def click(self, selector: str) -> None:
        x, y = self.center(selector)
        self._mouse("mouseMoved", x, y)
        self._mouse("mousePressed", x, y, 1)
        self._mouse("mouseReleased", x, y)

    def drag(self, source: str, target: str) -> None:
        """Press the mouse on ``source``, move it: Chromium starts an HTML5 drag, which is
        dropped on ``target`` (the page's dragstart, dragover and drop handlers all run)."""
        self.call("Input.setInterceptDrags", {"enabled": True})
        try:
            x, y = self.center(source)
            self._mouse("mouseMoved", x, y)
            self._mouse("mousePressed", x, y, 1)
            tx, ty = self.center(target)
            for step in range(1, 6):
                self._mouse("mouseMoved", x + (tx - x) * step / 5, y + (ty - y) * step / 5, 1)
            drag = self._event("Input.dragIntercepted")["params"]["data"]
            for kind in ("dragEnter", "dragOver", "drop"):
                self.call("Input.dispatchDragEvent", {"type": kind, "x": tx, "y": ty, "data": drag})
            self._mouse("mouseReleased", tx, ty)
        finally:
            self.call("Input.setInterceptDrags", {"enabled": False})

    def screenshot(self, path: Path) -> Path:
        self.call("Page.bringToFront")  # a tab in the background is not painted
        shot = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def errors(self) -> list[str]:
        """Uncaught exceptions and console errors of this page so far."""
        found = []
        for event in self.pipe.events:
            if event.get("sessionId") != self.session:
                continue
            params = event.get("params", {})
            if event.get("method") == "Runtime.exceptionThrown":
                found.append(str(params.get("exceptionDetails", {}).get("text")))
            elif (
                event.get("method") == "Runtime.consoleAPICalled" and params.get("type") == "error"
            ):
                found.append(" ".join(str(a.get("value", "")) for a in params.get("args", [])))
        return found


class Browser:
    """Headless Chromium with a DevTools pipe; ``page()`` opens a tab."""

    def __init__(self, chromium: str, profile: Path, timeout: float = 60):
        self.process, ours_read, ours_write = start_chromium(chromium, profile)
        self.fds = (ours_read, ours_write)
        self.pipe = _Pipe(ours_read, ours_write, timeout)

    def page(self, width: int = 1100, height: int = 900) -> Page:
        target = self.pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        page = Page(self.pipe, session)
        for method in ("Page.enable", "Runtime.enable"):
            page.call(method)
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        page.call("Emulation.setDeviceMetricsOverride", metrics)
        # every tab behaves as the focused one (two reviewers type at the same time)
        page.call("Emulation.setFocusEmulationEnabled", {"enabled": True})
        return page

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.pipe.call("Browser.close")
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
