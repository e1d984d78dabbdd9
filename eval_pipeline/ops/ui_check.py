"""The Dagster UI, checked in a real browser (headless Chromium driven by Playwright).

Two scenarios (`eval-pipeline ui-check --scenario success|failure|all`):

- **success** (the default): starts dagster-webserver on loopback against the local instance,
  opens the asset graph and the latest `scored_run`, and asserts what a person would look for:
  every asset key of eval_pipeline.definitions on the graph page, and the score tables of the
  scored_run `summary` metadata on the asset page.
- **failure**: in a temporary state dir and DAGSTER_HOME of its own (never the user's), writes a
  truncated LongMemEval upstream file, starts the webserver and the daemon (runs are queued:
  the instance's tag concurrency limits need the daemon to dequeue them), launches `eval_chain`
  the way the Launchpad does (the webserver's `launchPipelineExecution` mutation, with the
  corpus and paths resource config), waits until every run on that instance has finished and
  the sensors have seen it, then reads the asset lineage as a person does: only
  `longmemeval_upstream` may read "Failed" (its own checks could not run with it), every other
  asset must read as not failed, and no other asset's check may read EXECUTION_FAILED. What
  each asset reads is taken from its node in the lineage (the DOM) and cross-checked against
  the webserver's GraphQL as the page itself received it (`AssetGraphLiveQuery`, with the
  webapp's own `shouldDisplayRunFailure` rule); check statuses come from that same response
  (the lineage shows only "n / m Passed").

Screenshots are saved, pass or fail (a failure is easiest to read off its screenshot).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipeline.assets.tags import CHAIN_JOB_NAME
from eval_pipeline.ops.browser import BrowserError, HeadlessChromium, find_chromium
from eval_pipeline.ops.webserver import DagsterDaemon, DagsterWebserver, WebserverError
from eval_pipeline.ports import free_port

if TYPE_CHECKING:  # dagster and the chain load only when the check runs
    import dagster as dg

    from eval_pipeline.config import RunConfig

SCORED_RUN = "scored_run"
UPSTREAM = "longmemeval_upstream"
GRAPH_PATH = "/asset-groups"  # "Global asset lineage" in Dagster 1.13
SCENARIOS = ("success", "failure", "all")


# Dagster's first-visit dialog ("Join the Dagster community") covers the page. Marking it
# dismissed in this throwaway browser profile keeps it away without recording "seen" in the
# user's DAGSTER_HOME; should a Dagster upgrade rename the key, "Skip" is clicked instead.
NUX_TITLE = "Join the Dagster community"
NUX_DISMISS = "Skip"
NUX_INIT_SCRIPT = "try { localStorage.setItem('communityNux', JSON.stringify('1')); } catch (e) {}"

# The graph may open with groups collapsed; "Expand all groups" is bound to Alt+E (a toggle:
# it collapses them again when some are expanded, so it is pressed until every asset shows).
# The sidebar tree, expanded, lists every key in full (graph nodes middle-truncate names).
_EXPAND_SIDEBAR = """(() => {
  const carets = Array.from(document.querySelectorAll('[role=img][aria-label=arrow_drop_down]'))
    .filter((e) => (e.style.transform || '').includes('-90deg'));
  carets.forEach((e) => { const b = e.closest('button'); if (b) b.click(); });
  return carets.length;
})()"""


# The text of each asset node drawn in full in the lineage graph, by asset name. A node is a
# <foreignObject> whose name row carries the full name in `data-tooltip` (the visible name is
# middle-truncated). Nodes off screen are not drawn, and below a zoom of 0.6 (MINIMAL_SCALE in
# ui-core's AssetGraphExplorer.tsx) a node is a coloured box with its name and no status line.
_GRAPH_NODES = """(keys) => {
  const out = {};
  for (const fo of document.querySelectorAll('svg foreignObject')) {
    const named = fo.querySelector('[data-tooltip]');
    const key = named && named.getAttribute('data-tooltip');
    // innerText (laid out, one line per row) is an HTML property: read the node's own div.
    const html = fo.firstElementChild;
    if (key && keys.includes(key) && !(key in out)) {
      out[key] = (html && html.innerText) || fo.textContent || '';
    }
  }
  return out;
}"""


# How the lineage graph is drawn: collapsed groups, the zoom, the layout's size and the
# viewport's (the graph's own <svg> inside the zoomed, translated viewport element).
_GRAPH_STATE = """() => {
  const svg = document.querySelector('svg[class*=svgContainer]');
  if (!svg || !svg.parentElement || !svg.parentElement.parentElement) return null;
  const m = /matrix\\(\\s*([-0-9.e]+)/.exec(svg.parentElement.style.transform || '');
  const box = svg.parentElement.parentElement.getBoundingClientRect();
  return {
    collapsed: document.querySelectorAll('[class*=collapsedGroupNodeContainer]').length,
    scale: m ? parseFloat(m[1]) : null,
    layout: [parseFloat(svg.getAttribute('width')), parseFloat(svg.getAttribute('height'))],
    box: [box.width, box.height],
    window: [window.innerWidth, window.innerHeight],
  };
}"""

# The zoom at which a node shows its status line, with a margin (the webapp draws a node in
# full from 0.6), and the largest window the check grows to so that the whole lineage fits.
READABLE_SCALE = 0.7
MAX_WINDOW = (3840, 2400)


class UiCheckError(RuntimeError):
    """The UI check failed; the message is one line for the user."""


@dataclass
class PageResult:
    name: str
    url: str
    screenshot: Path | None
    missing: list[str] = field(default_factory=list)


@dataclass
class AssetReading:
    """What one asset reads as in the lineage of the failure scenario."""

    key: str
    # The status line of its node in the graph: "Failed", "Never materialized",
    # "Materialized", "Materializing", "Loading", or None when no node was drawn for it.
    dom: str | None
    # shouldDisplayRunFailure (ui-core/src/asset-graph/Utils.tsx) on the page's own data.
    graphql_failed: bool | None
    latest_run_status: str | None = None
    # Check name -> executionForLatestMaterialization.status ("NOT_EVALUATED" when none).
    checks: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.dom == "Failed" if self.dom is not None else bool(self.graphql_failed)


@dataclass
class RunInfo:
    run_id: str
    job: str
    status: str


@dataclass
class FailureScenarioResult:
    out_dir: Path
    screenshot: Path | None  # the whole lineage
    closeup: Path | None  # its top-left part, window-sized: the first stages, legible
    runs: list[RunInfo]
    readings: dict[str, AssetReading]
    problems: list[str]
    webserver_pid: int | None = None
    daemon_pid: int | None = None

    @property
    def failed_assets(self) -> list[str]:
        return sorted(k for k, r in self.readings.items() if r.failed)

    @property
    def execution_failed_checks(self) -> list[str]:
        return sorted(
            f"{key}:{name}"
            for key, r in self.readings.items()
            for name, status in r.checks.items()
            if status == "EXECUTION_FAILED"
        )

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class UiCheckResult:
    out_dir: Path
    webserver_pid: int | None
    pages: list[PageResult]
    failure: FailureScenarioResult | None = None

    @property
    def ok(self) -> bool:
        pages_ok = all(not p.missing for p in self.pages)
        return pages_ok and (self.failure is None or self.failure.ok)


def expected_asset_keys() -> list[str]:
    """Whatever the definitions define: the check follows the code, not a list kept here."""
    from eval_pipeline.assets.jobs import stage_job

    graph = stage_job().asset_layer.asset_graph
    return sorted(k.to_user_string() for k in graph.get_all_asset_keys())


def expected_group_names() -> list[str]:
    from eval_pipeline.assets.jobs import stage_job

    graph = stage_job().asset_layer.asset_graph
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


def ensure_scored_run(run: RunConfig | None = None, log: Callable[[str], None] = print) -> str:
    """The summary markdown of the latest scored_run; runs the chain first if there is none."""
    from eval_pipeline.dagster_home import local_instance

    instance = local_instance()
    markdown = latest_summary_markdown(instance)
    if markdown is not None:
        return markdown
    from eval_pipeline.config import RunConfig
    from eval_pipeline.ops.jobs import launch

    log("ui-check: no materialized scored_run in this instance; running the chain first")
    if not launch(instance, run or RunConfig(), trigger="ui-check").success:
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


def graph_nodes(browser: HeadlessChromium, keys: list[str]) -> dict[str, str]:
    """The text of each asset node drawn in the lineage graph, by key."""
    return browser.evaluate(_GRAPH_NODES, keys) or {}


def graph_state(browser: HeadlessChromium) -> dict[str, Any] | None:
    return browser.evaluate(_GRAPH_STATE)


def _window_to_fit(state: dict[str, Any], scale: float) -> tuple[int, int]:
    """The window in which the whole layout fits the graph's viewport at `scale`."""
    (layout_w, layout_h), (box_w, box_h) = state["layout"], state["box"]
    win_w, win_h = state["window"]
    want_w = win_w + max(0.0, layout_w * scale + 40 - box_w)
    want_h = win_h + max(0.0, layout_h * scale + 120 - box_h)  # the filter bar overlays the top
    return min(int(want_w), MAX_WINDOW[0]), min(int(want_h), MAX_WINDOW[1])


def show_all_assets(
    browser: HeadlessChromium, keys: list[str], timeout: float, nux: _Nux
) -> list[str]:
    """On the lineage page, until every asset is drawn as a node a person can read: press
    Alt+E ("Expand all groups") while groups are collapsed; if the whole lineage then fits
    only below a readable zoom, grow the window to fit it and reload (the graph zooms to fit
    on load); expand the sidebar tree too. Returns the keys still not drawn in full."""
    groups = expected_group_names()
    deadline = time.monotonic() + timeout
    last_press = time.monotonic()  # give the first layout a moment before toggling
    resized = False
    previous: dict[str, Any] | None = None
    while True:
        text = browser.text()
        nux(text)
        browser.evaluate(_EXPAND_SIDEBAR)
        state = graph_state(browser)
        drawn = graph_nodes(browser, keys)
        missing = [k for k in keys if k not in drawn]
        now = time.monotonic()
        settled = state is not None and state == previous  # no animation under way
        previous = state
        if state is not None and state["collapsed"] and all(g in text for g in groups):
            if now - last_press > 3.0:
                browser.press("Alt+KeyE")
                last_press = now
        elif settled and state["scale"] is not None:
            if state["scale"] < READABLE_SCALE and not resized:
                width, height = _window_to_fit(state, READABLE_SCALE)
                browser.set_window(width, height)
                browser.navigate(browser.page.url)
                resized, previous, last_press = True, None, time.monotonic()
                continue
            if not missing:
                return []
        if now >= deadline:
            return missing
        browser.pause(0.5)


def check_graph_page(
    browser: HeadlessChromium, base_url: str, out_dir: Path, timeout: float
) -> PageResult:
    url = base_url + GRAPH_PATH
    keys = expected_asset_keys()
    nux = _Nux(browser)
    browser.navigate(url)
    not_drawn = show_all_assets(browser, keys, timeout, nux)
    missing = browser.wait_for_text(keys, 5.0, on_poll=nux)
    missing += [f"{k} (no node in the graph)" for k in not_drawn if k not in missing]
    nux(browser.text())
    shot = browser.screenshot(out_dir / "asset_graph.png")
    browser.set_window(*browser.window)  # the next page at the usual size
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


# --- the failure scenario -------------------------------------------------------------------

# The webapp's own mutation (ui-core/src/runs/RunUtils.tsx), as the Launchpad sends it.
LAUNCH_MUTATION = """
mutation LaunchPipelineExecution($executionParams: ExecutionParams!) {
  launchPipelineExecution(executionParams: $executionParams) {
    __typename
    ... on LaunchRunSuccess { run { id pipelineName } }
    ... on PipelineNotFoundError { message }
    ... on InvalidSubsetError { message }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on PythonError { message }
  }
}
"""

WORKSPACE_QUERY = """
{ workspaceOrError { __typename ... on Workspace { locationEntries { name
    locationOrLoadError { __typename ... on RepositoryLocation { name
        repositories { name pipelines { name tags { key value } } } } } } } } }
"""

RUNS_QUERY = """
{ runsOrError { __typename
    ... on Runs { results { runId jobName status creationTime startTime endTime } }
    ... on PythonError { message } } }
"""

SENSORS_QUERY = """
query Sensors($selector: RepositorySelector!) {
  sensorsOrError(repositorySelector: $selector) { __typename
    ... on Sensors { results { name
        sensorState { status ticks(limit: 1) { status timestamp endTimestamp } } } } } }
"""

# Run statuses after which nothing more happens to the run.
TERMINAL_RUN_STATUSES = frozenset({"SUCCESS", "FAILURE", "CANCELED"})

# Never point the scenario's chain at another graph server: the embedded one, in its own state.
_GRAPH_ENV = (
    "EVAL_GRAPH_URI",
    "EVAL_GRAPH_BACKEND",
    "EVAL_GRAPH_DATABASE",
    "EVAL_GRAPH_HTTP_URL",
    "EVAL_GRAPH_USER",
    "EVAL_GRAPH_PASSWORD",
)


def write_truncated_upstream(path: Path) -> Path:
    """A malformed LongMemEval file: the bundled sample cut half-way (a truncated JSON array)."""
    from eval_pipeline.settings import BUNDLED_CORPUS_DIR

    data = (BUNDLED_CORPUS_DIR / "upstream" / "longmemeval_sample.json").read_bytes()
    cut = data[: len(data) // 2]
    try:
        json.loads(cut)
    except ValueError:
        pass
    else:  # pragma: no cover - half of a JSON array is never a JSON document
        raise UiCheckError("the truncated upstream file parsed as JSON")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(cut)
    return path


def failure_run_config(upstream: Path, state: Path) -> dict[str, Any]:
    """The run config a user would type into the Launchpad for a local upstream file, pinned
    by its sha256: preflight reads a file nobody pinned record by record and would refuse
    this one before any stage ran; a pinned one is verified, and fails, in its stage."""
    from eval_pipeline.corpus.upstream import file_sha256

    pin = file_sha256(upstream)
    return {
        "resources": {
            "corpus": {"config": {"upstream": str(upstream), "sha256": pin}},
            "paths": {"config": {"state_dir": str(state)}},
        }
    }


def isolated_env(state: Path) -> dict[str, str]:
    """Our environment, with the scenario's own state dir and DAGSTER_HOME (never the user's)."""
    env = {k: v for k, v in os.environ.items() if k not in _GRAPH_ENV}
    env["EVAL_PIPELINE_HOME"] = str(state)
    env["DAGSTER_HOME"] = str(state / "dagster_home")
    return env


def prepare_instance(home: Path) -> None:
    """A fresh DAGSTER_HOME configured like the local one (the repository's dagster.yaml) and
    with the graph pool limited to one step, as `local_instance()` does."""
    import dagster as dg

    from eval_pipeline.dagster_home import GRAPH_POOL
    from eval_pipeline.settings import REPO_DIR

    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(REPO_DIR / "dagster.yaml", home / "dagster.yaml")
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        storage = instance.event_log_storage
        if storage.supports_global_concurrency_limits:
            storage.set_concurrency_slots(GRAPH_POOL, 1)
    finally:
        instance.dispose()


def _gql(server: DagsterWebserver, query: str, variables: dict[str, Any] | None = None) -> dict:
    try:
        answer = server.graphql(query, variables, timeout=30)
    except OSError as exc:
        raise UiCheckError(f"the webserver did not answer GraphQL: {exc}") from None
    if answer.get("errors"):
        first = answer["errors"][0].get("message", answer["errors"][0])
        raise UiCheckError(f"GraphQL error from the webserver: {first}")
    return answer.get("data") or {}


def find_job(server: DagsterWebserver, job: str) -> tuple[str, str, list[dict[str, str]]]:
    """(code location, repository, the job's tags) of `job`, as the Launchpad knows them."""
    data = _gql(server, WORKSPACE_QUERY)
    for entry in data.get("workspaceOrError", {}).get("locationEntries") or []:
        location = entry.get("locationOrLoadError") or {}
        for repo in location.get("repositories") or []:
            for pipeline in repo.get("pipelines") or []:
                if pipeline["name"] == job:
                    return location["name"], repo["name"], pipeline.get("tags") or []
    raise UiCheckError(f"the webserver shows no job {job!r}")


def launch_like_the_launchpad(
    server: DagsterWebserver, job: str, run_config: dict[str, Any]
) -> tuple[str, str, str]:
    """Launch `job` through `launchPipelineExecution` with what the Launchpad sends for a
    whole asset job: the run config as YAML, no asset or check subset, mode "default", the
    job's own tags. Returns (run id, location, repository)."""
    import yaml

    location, repository, tags = find_job(server, job)
    params = {
        "runConfigData": yaml.safe_dump(run_config, sort_keys=False),
        "selector": {
            "repositoryLocationName": location,
            "repositoryName": repository,
            "pipelineName": job,
            "assetSelection": [],
            "assetCheckSelection": [],
        },
        "mode": "default",
        "executionMetadata": {"tags": [{"key": t["key"], "value": t["value"]} for t in tags]},
    }
    data = _gql(server, LAUNCH_MUTATION, {"executionParams": params})
    result = data.get("launchPipelineExecution") or {}
    if result.get("__typename") != "LaunchRunSuccess":
        detail = result.get("message") or "; ".join(
            e.get("message", "") for e in result.get("errors") or []
        )
        raise UiCheckError(f"launching {job} failed: {result.get('__typename')}: {detail}")
    return result["run"]["id"], location, repository


def list_runs(server: DagsterWebserver) -> list[dict[str, Any]]:
    data = _gql(server, RUNS_QUERY).get("runsOrError") or {}
    if data.get("__typename") != "Runs":
        raise UiCheckError(f"the webserver could not list runs: {data.get('message')}")
    return data["results"]


def _sensors_behind(
    server: DagsterWebserver, location: str, repository: str, since: float
) -> list[str]:
    """Running sensors that have not finished a tick started after `since` (a sensor may
    launch the next run when one ends: it has not had its say yet)."""
    selector = {"repositoryLocationName": location, "repositoryName": repository}
    data = _gql(server, SENSORS_QUERY, {"selector": selector}).get("sensorsOrError") or {}
    behind = []
    for sensor in data.get("results") or []:
        state = sensor.get("sensorState") or {}
        if state.get("status") != "RUNNING":
            continue
        ticks = state.get("ticks") or []
        tick = ticks[0] if ticks else None
        if tick is None or tick["timestamp"] <= since or tick["status"] == "STARTED":
            behind.append(sensor["name"])
    return behind


def wait_for_runs(
    server: DagsterWebserver,
    daemon: DagsterDaemon,
    location: str,
    repository: str,
    timeout: float,
    settle: float = 5.0,
    log: Callable[[str], None] = print,
) -> tuple[list[RunInfo], list[str]]:
    """Until every run on the (scenario's own) instance has finished, no new one has appeared
    for `settle` seconds, and every running sensor has ticked since the last one ended: runs
    queued behind the tag concurrency limit, or launched by a sensor as a stage ends, count
    too. Returns the runs, oldest first, and what was still pending at timeout."""
    deadline = time.monotonic() + timeout
    reported: dict[str, str] = {}
    while True:
        daemon.check_alive()
        runs = sorted(list_runs(server), key=lambda r: r.get("creationTime") or 0)
        for run in runs:
            if reported.get(run["runId"]) != run["status"]:
                reported[run["runId"]] = run["status"]
                log(f"ui-check: failure scenario: run {run['runId'][:8]} {run['jobName']} "
                    f"{run['status']}")  # fmt: skip
        infos = [RunInfo(r["runId"], r["jobName"], r["status"]) for r in runs]
        pending = [
            f"run {r.run_id[:8]} {r.status}" for r in infos if r.status not in TERMINAL_RUN_STATUSES
        ]
        if not pending and runs:
            last = max((r.get("endTime") or r.get("creationTime") or 0) for r in runs)
            if time.time() - last < settle:
                pending = [f"settling for {settle:.0f} s after the last run ended"]
            else:
                pending = [
                    f"sensor {name} has not ticked since the last run ended"
                    for name in _sensors_behind(server, location, repository, last)
                ]
            if not pending:
                return infos, []
        if time.monotonic() >= deadline:
            return infos, pending or ["no run was created"]
        time.sleep(1.0)


class _PageGraphql:
    """The lineage page's own `AssetGraphLiveQuery` answers, as the browser received them."""

    OPERATION = "AssetGraphLiveQuery"

    def __init__(self, browser: HeadlessChromium) -> None:
        self._responses: list[Any] = []
        browser.page.on("response", self._on_response)

    def _on_response(self, response: Any) -> None:
        request = response.request
        if "/graphql" in response.url and request.method == "POST":
            if self.OPERATION in (request.post_data or ""):
                self._responses.append(response)

    def live_data(self) -> tuple[dict[str, dict], dict[str, dict]]:
        """(asset node by key, latest info by key); later answers win."""
        nodes: dict[str, dict] = {}
        latest: dict[str, dict] = {}
        for response in self._responses:
            try:
                body = response.json()
            except Exception:  # a body the browser no longer holds: a later answer will do
                continue
            data = (body or {}).get("data") or {}
            for node in data.get("assetNodes") or []:
                nodes["/".join(node["assetKey"]["path"])] = node
            for info in data.get("assetsLatestInfo") or []:
                latest["/".join(info["assetKey"]["path"])] = info
        return nodes, latest


def should_display_run_failure(latest_run: dict | None, last_materialization: dict | None) -> bool:
    """The webapp's rule (ui-core/src/asset-graph/Utils.tsx, shouldDisplayRunFailure): an
    asset reads "Failed" when the latest run that planned it failed, unless that run (or a
    later report) materialized it."""
    if not latest_run or latest_run.get("status") != "FAILURE":
        return False
    if last_materialization:
        if last_materialization.get("runId") == latest_run.get("id"):
            return False
        end = latest_run.get("endTime")
        if end is not None and float(last_materialization["timestamp"]) > float(end) * 1000:
            return False
    return True


_STATUS_LINES = ("Failed, Overdue", "Failed", "Never materialized", "Materialized", "Overdue")


def node_status(node_text: str) -> str:
    """The status line of an asset node, from its rendered text."""
    lines = [line.strip() for line in node_text.splitlines() if line.strip()]
    if any(line.startswith("Materializing") for line in lines):
        return "Materializing"
    if any(line.startswith("Loading") for line in lines):
        return "Loading"
    for status in _STATUS_LINES:
        if status in lines:
            return "Failed" if status.startswith("Failed") else status
    return "unknown: " + " | ".join(lines)


def read_lineage(
    browser: HeadlessChromium, page_gql: _PageGraphql, keys: list[str], timeout: float
) -> dict[str, AssetReading]:
    """What each asset reads as: its node's status line and, from the page's own GraphQL, the
    run-failure rule and its checks' statuses. Waits until no node reads "Loading"."""
    deadline = time.monotonic() + timeout
    while True:
        texts = graph_nodes(browser, keys)
        nodes, latest = page_gql.live_data()
        loading = [k for k, t in texts.items() if node_status(t) in ("Loading", "Materializing")]
        if (not loading and all(k in nodes for k in keys)) or time.monotonic() >= deadline:
            break
        browser.pause(0.5)
    readings = {}
    for key in keys:
        node = nodes.get(key)
        info = latest.get(key) or {}
        run = info.get("latestRun")
        gql_failed = None
        checks: dict[str, str] = {}
        if node is not None:
            mats = node.get("assetMaterializations") or []
            gql_failed = should_display_run_failure(run, mats[0] if mats else None)
            for check in (node.get("assetChecksOrError") or {}).get("checks") or []:
                execution = check.get("executionForLatestMaterialization") or {}
                checks[check["name"]] = execution.get("status") or "NOT_EVALUATED"
        readings[key] = AssetReading(
            key=key,
            dom=node_status(texts[key]) if key in texts else None,
            graphql_failed=gql_failed,
            latest_run_status=(run or {}).get("status"),
            checks=checks,
        )
    return readings


def judge_failure_readings(
    readings: dict[str, AssetReading], runs: list[RunInfo], expected_failed: str = UPSTREAM
) -> list[str]:
    """What is wrong with the lineage after a malformed upstream, one clause each."""
    problems = []
    if not any(r.status == "FAILURE" for r in runs):
        problems.append(
            "no run failed (runs: "
            + (", ".join(f"{r.run_id[:8]} {r.status}" for r in runs) or "none")
            + ")"
        )
    no_node = [k for k, r in readings.items() if r.dom is None]
    if no_node:
        problems.append("no node in the lineage for " + ", ".join(no_node))
    no_data = [k for k, r in readings.items() if r.graphql_failed is None]
    if no_data:
        problems.append("the page received no live data for " + ", ".join(no_data))
    disagree = [
        f"{k} (node reads {r.dom}, GraphQL says {'failed' if r.graphql_failed else 'not failed'})"
        for k, r in readings.items()
        if r.dom is not None and r.graphql_failed is not None
        and (r.dom == "Failed") != r.graphql_failed
    ]  # fmt: skip
    if disagree:
        problems.append("the node and the page's GraphQL disagree on " + ", ".join(disagree))
    unsettled = [
        f"{k} ({r.dom})" for k, r in readings.items() if r.dom in ("Loading", "Materializing")
    ]
    if unsettled:
        problems.append("still not settled: " + ", ".join(unsettled))
    failed = sorted(k for k, r in readings.items() if r.failed)
    if expected_failed not in failed:
        reads = readings[expected_failed].dom if expected_failed in readings else "nothing"
        problems.append(f"{expected_failed} does not read Failed (it reads {reads})")
    others = [k for k in failed if k != expected_failed]
    if others:
        problems.append(f"{len(others)} other asset(s) read Failed: " + ", ".join(others))
    # The failed stage is its asset and the asset's own checks (planned in its run, they could
    # not run); a check of any other asset reading EXECUTION_FAILED is a stage wrongly red.
    execution_failed = sorted(
        f"{k}:{name}" for k, r in readings.items() for name, st in r.checks.items()
        if st == "EXECUTION_FAILED" and k != expected_failed
    )  # fmt: skip
    if execution_failed:
        problems.append(
            f"{len(execution_failed)} check(s) of other assets read EXECUTION_FAILED: "
            + ", ".join(execution_failed)
        )
    return problems


def run_failure_scenario(
    binary: str,
    out_dir: Path,
    port: int | None = None,
    timeout: float = 90.0,
    run_timeout: float = 600.0,
    log: Callable[[str], None] = print,
) -> FailureScenarioResult:
    """The failure scenario (see the module docstring), in a temporary state of its own that
    is removed afterwards; logs and the screenshot go to `out_dir`."""
    from eval_pipeline.graph import server as graph_server

    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="eval-ui-failure-"))
    state = tmp / "state"
    env = isolated_env(state)
    screenshot: Path | None = None
    closeup: Path | None = None
    server = DagsterWebserver(port or free_port(), log_path=out_dir / "webserver.log", env=env)
    daemon = DagsterDaemon(log_path=out_dir / "daemon.log", env=env)
    try:
        prepare_instance(Path(env["DAGSTER_HOME"]))
        upstream = write_truncated_upstream(tmp / "upstream" / "longmemeval_truncated.json")
        log(f"ui-check: failure scenario: state {state}, truncated upstream {upstream}")
        with server, daemon:
            log(
                f"ui-check: failure scenario: dagster-webserver pid {server.pid} on "
                f"{server.base_url}, dagster-daemon pid {daemon.pid}"
            )
            server.wait_ready(timeout)
            run_id, location, repository = launch_like_the_launchpad(
                server, CHAIN_JOB_NAME, failure_run_config(upstream, state)
            )
            log(f"ui-check: failure scenario: launched {CHAIN_JOB_NAME} run {run_id[:8]}")
            runs, pending = wait_for_runs(
                server, daemon, location, repository, run_timeout, log=log
            )
            keys = expected_asset_keys()
            with HeadlessChromium(binary) as browser:
                browser.add_init_script(NUX_INIT_SCRIPT)
                page_gql = _PageGraphql(browser)
                nux = _Nux(browser)
                browser.navigate(server.base_url + GRAPH_PATH)
                show_all_assets(browser, keys, timeout, nux)
                readings = read_lineage(browser, page_gql, keys, timeout)
                nux(browser.text())
                screenshot = browser.screenshot(out_dir / "failure_lineage.png")
                # What the usual window shows of it, at the same zoom: the sidebar's status
                # icons and the first stages, legible without zooming into the whole picture.
                width, height = browser.window
                size = browser.page.viewport_size or {"width": width, "height": height}
                clip = {
                    "x": 0,
                    "y": 0,
                    "width": min(width, size["width"]),
                    "height": min(height, size["height"]),
                }
                closeup = browser.screenshot(out_dir / "failure_lineage_closeup.png", clip=clip)
        problems = []
        if pending:
            problems.append(f"runs not finished after {run_timeout:.0f} s: " + "; ".join(pending))
        problems += judge_failure_readings(readings, runs)
    except (BrowserError, WebserverError) as exc:
        raise UiCheckError(f"failure scenario: {exc}") from None
    finally:
        graph_server.stop(state / "graph" / "arcadedb")  # if a run of the scenario started one
        shutil.rmtree(tmp, ignore_errors=True)
    return FailureScenarioResult(
        out_dir=out_dir,
        screenshot=screenshot,
        closeup=closeup,
        runs=runs,
        readings=readings,
        problems=problems,
        webserver_pid=server.pid,
        daemon_pid=daemon.pid,
    )


def run_ui_check(
    port: int | None = None,
    out_dir: Path | None = None,
    timeout: float = 90.0,
    run: RunConfig | None = None,
    chromium: str | None = None,
    log: Callable[[str], None] = print,
    scenario: str = "success",
    run_timeout: float = 600.0,
) -> UiCheckResult:
    """The whole check. Raises UiCheckError (one line) on anything that stops it; returns a
    result whose pages list what was missing, and whose `failure` (scenario failure or all)
    lists what the lineage got wrong, otherwise."""
    from eval_pipeline.dagster_home import ensure_dagster_home
    from eval_pipeline.settings import state_dir

    if scenario not in SCENARIOS:
        raise UiCheckError(f"unknown scenario {scenario!r} (one of {', '.join(SCENARIOS)})")
    binary = chromium or find_chromium()
    if not binary:
        raise UiCheckError(
            "no Chromium at /usr/bin/chromium: "
            "install it with `bash scripts/install-system-deps.sh`"
        )
    if scenario != "failure":  # the failure scenario never touches the user's instance
        ensure_dagster_home()
    out_dir = Path(out_dir) if out_dir else state_dir() / "ui_check"
    out_dir.mkdir(parents=True, exist_ok=True)
    pages: list[PageResult] = []
    webserver_pid = None
    if scenario in ("success", "all"):
        summary_md = ensure_scored_run(run, log=log)
        server = DagsterWebserver(port or free_port(), log_path=out_dir / "webserver.log")
        try:
            with server:
                log(f"ui-check: dagster-webserver pid {server.pid} on {server.base_url}")
                server.wait_ready(timeout)
                with HeadlessChromium(binary) as browser:
                    browser.add_init_script(NUX_INIT_SCRIPT)
                    pages = [
                        check_graph_page(browser, server.base_url, out_dir, timeout),
                        check_scored_run_page(
                            browser, server.base_url, out_dir, summary_md, timeout
                        ),
                    ]
        except (BrowserError, WebserverError) as exc:
            raise UiCheckError(str(exc)) from None
        webserver_pid = server.pid
    failure = None
    if scenario in ("failure", "all"):
        failure = run_failure_scenario(
            binary, out_dir / "failure", port=port, timeout=timeout,
            run_timeout=run_timeout, log=log,
        )  # fmt: skip
    return UiCheckResult(out_dir=out_dir, webserver_pid=webserver_pid, pages=pages, failure=failure)
