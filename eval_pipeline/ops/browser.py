"""Headless Chromium for the UI check, driven by Playwright for Python (sync API).

The browser is Debian's `chromium` (`/usr/bin/chromium`), given to Playwright as
`executable_path`: Playwright's own browser builds are never downloaded (`playwright install`
is never run, and nothing here needs it). Playwright starts Chromium in a process group of its
own and kills that group on close, so no renderer outlives the check.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page, Playwright

CHROMIUM = "/usr/bin/chromium"

# Quiet and self-contained: no sandbox (we may run as root in a container), no GPU, no
# background traffic or updates (this machine's closed network refuses those connections,
# and Chromium then stalls on them). Headless and the throwaway profile are Playwright's.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


class BrowserError(RuntimeError):
    """Chromium did not start, answer, or do what was asked."""


def find_chromium() -> str | None:
    """Debian's `chromium` package, else whatever `chromium` is on PATH."""
    if os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    return shutil.which("chromium")


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


class HeadlessChromium:
    """One headless browser with one page; a context manager that always cleans up.

    `page` is the Playwright `Page`, for whatever the helpers here do not cover.
    """

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
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._context: BrowserContext | None = None
        self._page: Page | None = None

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
        try:
            from playwright.sync_api import Error, sync_playwright
        except ImportError:  # pragma: no cover - a dependency of the package
            raise BrowserError(
                "the playwright package is missing: `pip install -e .` installs it"
            ) from None
        w, h = self.window
        try:
            self._playwright = sync_playwright().start()
            self._browser = self._playwright.chromium.launch(
                executable_path=self.binary,
                headless=True,
                args=list(CHROMIUM_ARGS),
                timeout=self.start_timeout * 1000,
                # Ours to stop (close()); a Ctrl-C meant for the check must not race it.
                handle_sigint=False,
                handle_sigterm=False,
                handle_sighup=False,
            )
            self._context = self._browser.new_context(
                viewport={"width": w, "height": h}, device_scale_factor=1
            )
            self._page = self._context.new_page()
        except Error as exc:
            raise BrowserError(
                f"chromium ({self.binary}) did not start: {_first_line(exc)}"
            ) from None

    @property
    def page(self) -> Page:
        if self._page is None:
            raise BrowserError("the browser is not running")
        return self._page

    def add_init_script(self, source: str) -> None:
        """JavaScript run in every new document before the page's own scripts."""
        assert self._context is not None
        self._context.add_init_script(source)

    def navigate(self, url: str, timeout: float = 60.0) -> None:
        from playwright.sync_api import Error

        try:
            self.page.goto(url, wait_until="domcontentloaded", timeout=timeout * 1000)
        except Error as exc:
            raise BrowserError(f"could not open {url}: {_first_line(exc)}") from None

    def evaluate(self, expression: str, arg: Any = None) -> Any:
        """A JavaScript expression, or a function given `arg`; its JSON-able value."""
        from playwright.sync_api import Error

        try:
            return self.page.evaluate(expression, arg)
        except Error as exc:
            raise BrowserError(f"script failed: {_first_line(exc)}") from None

    def text(self) -> str:
        """What a reader sees: the rendered text of the page (CSS ellipsis does not cut it)."""
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def pause(self, seconds: float) -> None:
        """Wait, letting Playwright deliver events meanwhile (time.sleep would hold them)."""
        self.page.wait_for_timeout(seconds * 1000)

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
                self.pause(settle)
                return []
            if time.monotonic() >= deadline:
                return missing
            self.pause(0.5)

    def click_text(self, text: str, timeout: float = 5.0) -> bool:
        """Click the first element whose whole text is exactly `text` (the innermost such
        element: Playwright's exact text match); False if there is none."""
        from playwright.sync_api import Error

        target = self.page.get_by_text(text, exact=True)
        try:
            if target.count() == 0:
                return False
            target.first.click(timeout=timeout * 1000)
        except Error:
            return False
        return True

    def press(self, keys: str) -> None:
        """A real key press as a user types it, in Playwright's notation ("Alt+KeyE")."""
        self.page.keyboard.press(keys)

    def set_window(self, width: int, height: int) -> None:
        """Resize the page's viewport (what a screenshot shows)."""
        self.page.set_viewport_size({"width": width, "height": height})

    def screenshot(self, path: Path, clip: dict[str, float] | None = None) -> Path:
        """A PNG of the viewport, or of the `clip` rectangle of it (x, y, width, height)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path), clip=clip, timeout=60_000)
        return path

    def close(self) -> None:
        # Each part on its own: one that fails must not keep the others (and Chromium) alive.
        for part in (self._context, self._browser):
            if part is not None:
                try:
                    part.close()
                except Exception:
                    pass
        self._page = self._context = self._browser = None
        if self._playwright is not None:
            try:
                self._playwright.stop()
            except Exception:
                pass
            self._playwright = None
