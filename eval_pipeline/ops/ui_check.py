"""The Dagster UI, checked in a real browser.

Starts dagster-webserver on loopback against the local instance, opens the asset graph and
the latest `scored_run` in headless Chromium, and asserts what a person would look for:
every asset key of eval_pipeline.definitions on the graph page, and the score tables of the
scored_run `summary` metadata on the asset page. Screenshots of both pages are saved, pass
or fail (a failure is easiest to read off its screenshot).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipeline.ops.browser import BrowserError, HeadlessChromium, find_chromium
from eval_pipeline.ops.webserver import DagsterWebserver, WebserverError
from eval_pipeline.ports import free_port

if TYPE_CHECKING:  # dagster and the chain load only when the check runs
    import dagster as dg

    from eval_pipeline.run_chain import RunOptions

SCORED_RUN = "scored_run"
GRAPH_PATH = "/asset-groups"  # "Global asset lineage" in Dagster 1.13


# Dagster's first-visit dialog ("Join the Dagster community") covers the page. Marking it
# dismissed in this throwaway browser profile keeps it away without recording "seen" in the
# user's DAGSTER_HOME; should a Dagster upgrade rename the key, "Skip" is clicked instead.
NUX_TITLE = "Join the Dagster community"
NUX_DISMISS = "Skip"
NUX_INIT_SCRIPT = "try { localStorage.setItem('communityNux', JSON.stringify('1')); } catch (e) {}"

# The graph collapses groups; "Expand all groups" is bound to Alt+E (a toggle: press once).
# The sidebar tree, expanded, lists every key in full (graph nodes middle-truncate names).
_EXPAND_SIDEBAR = """(() => {
  const carets = Array.from(document.querySelectorAll('[role=img][aria-label=arrow_drop_down]'))
    .filter((e) => (e.style.transform || '').includes('-90deg'));
  carets.forEach((e) => { const b = e.closest('button'); if (b) b.click(); });
  return carets.length;
})()"""


class UiCheckError(RuntimeError):
    """The UI check failed; the message is one line for the user."""


@dataclass
class PageResult:
    name: str
    url: str
    screenshot: Path | None
    missing: list[str] = field(default_factory=list)


@dataclass
class UiCheckResult:
    out_dir: Path
    webserver_pid: int | None
    pages: list[PageResult]

    @property
    def ok(self) -> bool:
        return all(not p.missing for p in self.pages)


def expected_asset_keys() -> list[str]:
    """Whatever the definitions define: the check follows the code, not a list kept here."""
    from eval_pipeline.definitions import defs

    graph = defs.resolve_asset_graph()
    return sorted(k.to_user_string() for k in graph.get_all_asset_keys())


def expected_group_names() -> list[str]:
    from eval_pipeline.definitions import defs

    graph = defs.resolve_asset_graph()
    return sorted({graph.get(k).group_name or "default" for k in graph.get_all_asset_keys()})


def summary_needles(markdown: str) -> list[str]:
    """Text the rendered summary must show: each heading, and the header row and first data
    row of each table (the real numbers, not only the labels).

    Cells with markdown inline syntax are skipped: rendered, they no longer read the same.
    """
    needles: list[str] = []
    lines = [line.strip() for line in markdown.splitlines()]
    for i, line in enumerate(lines):
        heading = re.match(r"^#{1,6}\s+(.*\S)", line)
        if heading:
            needles.append(heading.group(1))
            continue
        is_separator = i + 1 < len(lines) and re.fullmatch(r"\|?[\s:|-]+\|?", lines[i + 1])
        if line.startswith("|") and is_separator and "-" in lines[i + 1]:
            rows = [line] + ([lines[i + 2]] if i + 2 < len(lines) else [])
            for row in rows:
                if not row.startswith("|"):
                    continue
                cells = [c.strip() for c in row.strip("|").split("|")]
                needles += [c for c in cells if c and not re.search(r"[*`\[\]<>\\]", c)]
    return list(dict.fromkeys(needles))  # in order, once each


def latest_summary_markdown(instance: dg.DagsterInstance) -> str | None:
    import dagster as dg

    event = instance.get_latest_materialization_event(dg.AssetKey(SCORED_RUN))
    if event is None or event.asset_materialization is None:
        return None
    value = event.asset_materialization.metadata.get("summary")
    if value is None:
        raise UiCheckError("the latest scored_run materialization has no 'summary' metadata")
    return str(value.value)


def ensure_scored_run(
    run_options: RunOptions | None = None, log: Callable[[str], None] = print
) -> str:
    """The summary markdown of the latest scored_run; runs the chain first if there is none."""
    from eval_pipeline.dagster_home import local_instance

    instance = local_instance()
    markdown = latest_summary_markdown(instance)
    if markdown is not None:
        return markdown
    from eval_pipeline.run_chain import RunOptions, run_chain

    log("ui-check: no materialized scored_run in this instance; running the chain first")
    if run_chain(run_options or RunOptions()) != 0:
        raise UiCheckError("`eval-pipeline run` failed, so there is no scored_run to look at")
    markdown = latest_summary_markdown(instance)
    if markdown is None:
        raise UiCheckError("the chain ran but recorded no scored_run materialization")
    return markdown


class _Nux:
    """Dismisses Dagster's first-visit dialog whenever it shows up (it can come late)."""

    def __init__(self, browser: HeadlessChromium) -> None:
        self.browser = browser

    def __call__(self, page_text: str) -> None:
        if NUX_TITLE in page_text:
            self.browser.click_text(NUX_DISMISS)


def check_graph_page(
    browser: HeadlessChromium, base_url: str, out_dir: Path, timeout: float
) -> PageResult:
    url = base_url + GRAPH_PATH
    keys = expected_asset_keys()
    nux = _Nux(browser)
    browser.navigate(url)
    # Groups first (the graph has rendered), then expand them once.
    missing = browser.wait_for_text(expected_group_names(), timeout, settle=0.5, on_poll=nux)
    if not missing:
        browser.press("e", "KeyE", 69, modifiers=1)

    def expand(page_text: str) -> None:
        nux(page_text)
        browser.evaluate(_EXPAND_SIDEBAR)

    missing += browser.wait_for_text(keys, timeout, on_poll=expand)
    nux(browser.text())
    shot = browser.screenshot(out_dir / "asset_graph.png")
    return PageResult("asset graph", url, shot, missing)


def check_scored_run_page(
    browser: HeadlessChromium, base_url: str, out_dir: Path, summary_md: str, timeout: float
) -> PageResult:
    # The Events view: the latest materialization, its run, and its metadata at full width
    # (the Overview squeezes the metadata table beside the definition panel).
    url = f"{base_url}/assets/{SCORED_RUN}?view=events"
    needles = [SCORED_RUN, *summary_needles(summary_md)]
    nux = _Nux(browser)
    browser.navigate(url)
    missing = browser.wait_for_text(needles, timeout, on_poll=nux)
    nux(browser.text())
    shot = browser.screenshot(out_dir / f"{SCORED_RUN}.png")
    return PageResult(SCORED_RUN, url, shot, missing)


def run_ui_check(
    port: int | None = None,
    out_dir: Path | None = None,
    timeout: float = 90.0,
    run_options: RunOptions | None = None,
    chromium: str | None = None,
    log: Callable[[str], None] = print,
) -> UiCheckResult:
    """The whole check. Raises UiCheckError (one line) on anything that stops it; returns a
    result whose pages list what was missing otherwise."""
    from eval_pipeline.dagster_home import ensure_dagster_home
    from eval_pipeline.settings import state_dir

    binary = chromium or find_chromium()
    if not binary:
        raise UiCheckError(
            "no Chromium at /usr/bin/chromium: "
            "install it with `bash scripts/install-system-deps.sh`"
        )
    ensure_dagster_home()
    out_dir = Path(out_dir) if out_dir else state_dir() / "ui_check"
    out_dir.mkdir(parents=True, exist_ok=True)
    summary_md = ensure_scored_run(run_options, log=log)

    server = DagsterWebserver(port or free_port(), log_path=out_dir / "webserver.log")
    try:
        with server:
            log(f"ui-check: dagster-webserver pid {server.pid} on {server.base_url}")
            server.wait_ready(timeout)
            with HeadlessChromium(binary) as browser:
                browser.add_init_script(NUX_INIT_SCRIPT)
                pages = [
                    check_graph_page(browser, server.base_url, out_dir, timeout),
                    check_scored_run_page(browser, server.base_url, out_dir, summary_md, timeout),
                ]
    except (BrowserError, WebserverError) as exc:
        raise UiCheckError(str(exc)) from None
    return UiCheckResult(out_dir=out_dir, webserver_pid=server.pid, pages=pages)
