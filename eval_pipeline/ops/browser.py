"""Headless Chromium driven over the DevTools protocol (CDP), standard library + `websockets`.

`websockets` arrives with dagster-webserver (through `uvicorn[standard]`), so the check needs
no extra dependency. `--dump-dom` alone cannot tell when a JavaScript app has finished
rendering; over CDP we poll the rendered text until what we expect is there (or time runs out).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

CHROMIUM = "/usr/bin/chromium"

# Quiet and self-contained: no sandbox (we may run as root in a container), no GPU, no
# background traffic or updates, a throwaway profile.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)


# Innermost: a button's text is also its parents' text; clicking the parent may miss it.
_CLICK_BY_TEXT = """(want) => {
  const same = (e) => e.innerText && e.innerText.trim() === want;
  const hits = Array.from(document.querySelectorAll('body *'))
    .filter((e) => same(e) && !Array.from(e.children).some(same));
  if (!hits.length) return false;
  hits[0].click();
  return true;
}"""


class BrowserError(RuntimeError):
    """Chromium did not start, answer, or do what was asked."""


def find_chromium() -> str | None:
    """Debian's `chromium` package, else whatever `chromium` is on PATH."""
    if os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    return shutil.which("chromium")


def _no_proxy_get(url: str, timeout: float) -> Any:
    # A loopback address must never go through an HTTP(S)_PROXY from the environment.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as resp:
        return json.loads(resp.read().decode("utf-8"))


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else (pgid reused): not ours to wait on
        return False
    return True


def kill_group(proc: subprocess.Popen, grace: float) -> None:
    """Stop the process group started with `start_new_session=True`: SIGTERM, then SIGKILL
    whatever is left after `grace` seconds. Returns once the whole group is gone, so
    children (renderers, the code server) cannot outlive the check."""
    pgid = proc.pid
    for sig, wait_s in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            # Reap the leader: unreaped, it stays in the group as a zombie.
            if proc.poll() is not None and not _group_alive(pgid):
                return
            time.sleep(0.1)
    proc.wait(timeout=5)


class HeadlessChromium:
    """One headless browser with one page; a context manager that always cleans up."""

    def __init__(
        self,
        binary: str | None = None,
        window: tuple[int, int] = (1600, 1000),
        start_timeout: float = 30.0,
    ) -> None:
        self.binary = binary or find_chromium()
        if not self.binary:
            raise BrowserError(f"no Chromium: install Debian's chromium package ({CHROMIUM})")
        self.window = window
        self.start_timeout = start_timeout
        self._proc: subprocess.Popen | None = None
        self._profile: Path | None = None
        self._stderr_path: Path | None = None
        self._ws: Any = None
        self._ws_scope = contextlib.ExitStack()
        self._next_id = 0

    def __enter__(self) -> HeadlessChromium:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _start(self) -> None:
        from websockets.sync.client import connect

        self._profile = Path(tempfile.mkdtemp(prefix="eval-ui-chromium-"))
        w, h = self.window
        args = [
            self.binary,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={self._profile}",
            f"--window-size={w},{h}",
            "about:blank",
        ]
        # Beside the profile, not in it: Chromium owns the profile directory.
        self._stderr_path = self._profile.parent / f"{self._profile.name}.stderr"
        with open(self._stderr_path, "wb") as stderr:
            self._proc = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                start_new_session=True,
            )  # fmt: skip
        port = self._wait_for_port()
        page_ws = self._wait_for_page(port)
        # proxy=None: see _no_proxy_get; max_size=None: screenshots are several MB of base64.
        # Entered as a context manager: newer websockets deprecate a bare connect().
        self._ws = self._ws_scope.enter_context(
            connect(page_ws, proxy=None, max_size=None, open_timeout=10)
        )
        # --window-size includes window decorations in some modes: pin the viewport itself.
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": False},
        )
        # Without the Page domain enabled, init scripts (add_init_script) never run.
        self.call("Page.enable")

    def _stderr_tail(self) -> str:
        if self._stderr_path is None:
            return ""
        try:
            lines = self._stderr_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1] if lines else ""

    def _wait_for_port(self) -> int:
        # With --remote-debugging-port=0 Chromium picks a free port and writes it here.
        assert self._proc is not None and self._profile is not None
        marker = self._profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrowserError(
                    f"chromium exited with {self._proc.returncode}: {self._stderr_tail()}"
                )
            try:
                first = marker.read_text().splitlines()[0]
                return int(first)
            except (OSError, IndexError, ValueError):
                time.sleep(0.1)
        raise BrowserError(f"chromium did not open its DevTools port in {self.start_timeout:.0f} s")

    def _wait_for_page(self, port: int) -> str:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            try:
                targets = _no_proxy_get(f"http://127.0.0.1:{port}/json/list", timeout=5)
            except OSError:
                targets = []
            for target in targets:
                if target.get("type") == "page" and target.get("webSocketDebuggerUrl"):
                    return target["webSocketDebuggerUrl"]
            time.sleep(0.2)
        raise BrowserError("chromium opened no page target")

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30) -> Any:
        """One CDP command; events arriving meanwhile (Page.*) are read and dropped."""
        self._next_id += 1
        msg_id = self._next_id
        self._ws.send(json.dumps({"id": msg_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrowserError(f"chromium did not answer {method} in {timeout:.0f} s")
            try:
                msg = json.loads(self._ws.recv(timeout=remaining))
            except TimeoutError:
                continue
            if msg.get("id") != msg_id:
                continue
            if "error" in msg:
                raise BrowserError(f"{method}: {msg['error'].get('message', msg['error'])}")
            return msg.get("result", {})

    def add_init_script(self, source: str) -> None:
        """JavaScript run in every new document before the page's own scripts."""
        self.call("Page.addScriptToEvaluateOnNewDocument", {"source": source})

    def navigate(self, url: str) -> None:
        result = self.call("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise BrowserError(f"could not open {url}: {result['errorText']}")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"script failed: {result['exceptionDetails'].get('text')}")
        return result.get("result", {}).get("value")

    def text(self) -> str:
        """What a reader sees: the rendered text of the page (CSS ellipsis does not cut it)."""
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def wait_for_text(
        self,
        needles: list[str],
        timeout: float,
        settle: float = 1.0,
        on_poll: Callable[[str], None] | None = None,
    ) -> list[str]:
        """Poll until every needle is on the page; return the ones still missing at timeout.

        `on_poll` sees the page text at every poll (to dismiss a dialog, expand a tree...).
        `settle`: once all are present, wait a little more so the screenshot shows a finished
        layout rather than the first frame in which the text appeared.
        """
        deadline = time.monotonic() + timeout
        missing = list(needles)
        while True:
            page = self.text()
            if on_poll is not None:
                on_poll(page)
            missing = [n for n in needles if n not in page]
            if not missing:
                time.sleep(settle)
                return []
            if time.monotonic() >= deadline:
                return missing
            time.sleep(0.5)

    def click_text(self, text: str) -> bool:
        """Click the innermost element whose text is exactly `text`; False if there is none."""
        return bool(self.evaluate(f"({_CLICK_BY_TEXT})({json.dumps(text)})"))

    def press(self, key: str, code: str, key_code: int, modifiers: int = 0) -> None:
        """A real key press (modifiers: 1 Alt, 2 Ctrl, 4 Meta, 8 Shift), as a user types it."""
        for kind in ("rawKeyDown", "keyUp"):
            self.call(
                "Input.dispatchKeyEvent",
                {
                    "type": kind,
                    "key": key,
                    "code": code,
                    "windowsVirtualKeyCode": key_code,
                    "modifiers": modifiers,
                },
            )

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", {"format": "png"}, timeout=60)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        if self._ws is not None:
            try:
                self.call("Browser.close", timeout=5)
            except Exception:  # the process is stopped below regardless
                pass
            try:
                self._ws_scope.close()
            except Exception:
                pass
            self._ws = None
        if self._proc is not None:
            kill_group(self._proc, grace=5)
            self._proc = None
        if self._profile is not None:
            shutil.rmtree(self._profile, ignore_errors=True)
            self._profile = None
        if self._stderr_path is not None:
            self._stderr_path.unlink(missing_ok=True)
            self._stderr_path = None
