"""Preflight: every option checked before any Dagster run is launched (so before the wipe).

The options themselves are typed and checked as they are read (`config.RunConfig`); preflight
checks what only building can tell: it builds what the stages would build (`build.py`) — the
upstream file resolved, the reconciler and the retriever constructed, every model role's
credentials read, the graph address parsed — without touching the graph or calling a model,
and raises PreflightError with one line naming the option. `eval-pipeline run` calls it
before launching anything (exit 2); the `eval_chain` op calls it before its first stage, so a
Launchpad typo fails in seconds, not after the wipe.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from eval_pipeline import build
from eval_pipeline.config import RunConfig
from eval_pipeline.corpus.batches import MAX_BATCHES
from eval_pipeline.corpus.canaries import load_canaries
from eval_pipeline.corpus.errata import check_errata_option
from eval_pipeline.corpus.errors import CorpusError
from eval_pipeline.corpus.sample_check import check_sample_floor, check_unpinned_records
from eval_pipeline.corpus.upstream import check_resolvable
from eval_pipeline.graph.store import BATCH_PLACEHOLDER
from eval_pipeline.llm import LLMConfigError, LLMError, LLMSettings
from eval_pipeline.llm.config import safe_spec
from eval_pipeline.llm.layer import LLMLayer
from eval_pipeline.llm.role_check import ModelRoleError, check_local_role, check_model_roles
from eval_pipeline.llm.uri_credentials import looks_secret_value, mask_uri, uri_credential
from eval_pipeline.plugins.errors import PluginLoadError
from eval_pipeline.reconcile.protocol import ReconcileError
from eval_pipeline.retrieve.reader_prompts import DEFAULT_READER_PROMPT
from eval_pipeline.score.panel import OPTION as PANEL_OPTION
from eval_pipeline.score.panel import PanelError, parse_panel

BOLT_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")


class PreflightError(ValueError):
    """An option that cannot work; the message is one line naming it."""


def check_reader_prompt(run: RunConfig) -> None:
    """A reader prompt other than the default asks for a reader model: the offline reader
    sends no prompt, and a run pinned to a prompt nobody read would claim what it did not do."""
    prompt = run.retrieval.reader_prompt
    if prompt != DEFAULT_READER_PROMPT and run.retrieval.reader.offline:
        raise PreflightError(
            f"--reader-prompt {prompt}: the offline reader sends no prompt; give a reader "
            "model (--reader PROVIDER:MODEL) or leave --reader-prompt out"
        )


def _refuse_credentials(uri: str, option: str) -> None:
    """Credentials anywhere in an address end up in Dagster's run storage and in logs (the
    driver's own errors print the URI): refused, naming the part, never showing it."""
    where = uri_credential(uri)
    if where is not None:
        raise PreflightError(
            f"{option} {mask_uri(uri)} must not carry credentials ({where}); set "
            "EVAL_GRAPH_USER and EVAL_GRAPH_PASSWORD in the environment instead"
        )


def check_graph_uri(uri: str | None, *, option: str = "--graph-uri") -> None:
    if uri is None:
        return
    _refuse_credentials(uri, option)
    parts = urlsplit(uri)
    if parts.scheme not in BOLT_SCHEMES or not parts.hostname:
        raise PreflightError(
            f"{option} {mask_uri(uri)} is not a Bolt address: expected bolt://HOST:PORT "
            f"(schemes: {', '.join(BOLT_SCHEMES)})"
        )
    if parts.query and parts.scheme.startswith("bolt"):
        # The driver refuses it later, with a traceback printing the whole URI.
        raise PreflightError(
            f"{option} {mask_uri(uri)}: a bolt:// address takes no query (a routing context "
            "is for neo4j:// addresses)"
        )


def check_batches(batches: int, uri: str | None, batch_uri: str | None = None) -> None:
    """K batches need K graph instances: K embedded servers, or a URI naming one per batch."""
    if not 1 <= batches <= MAX_BATCHES:
        raise PreflightError(f"--batches must be between 1 and {MAX_BATCHES}, not {batches}")
    if batch_uri is not None and BATCH_PLACEHOLDER not in batch_uri:
        raise PreflightError(
            f"EVAL_GRAPH_BATCH_URI {mask_uri(batch_uri)} must name each batch's instance with "
            f"{BATCH_PLACEHOLDER} (e.g. bolt://memgraph-{BATCH_PLACEHOLDER}:7687)"
        )
    if batches > 1 and uri is not None and BATCH_PLACEHOLDER not in uri and not batch_uri:
        raise PreflightError(
            f"--batches {batches} needs one graph instance per batch: put {BATCH_PLACEHOLDER} "
            f"in --graph-uri (e.g. bolt://memgraph-{BATCH_PLACEHOLDER}:7687)"
        )


def check_http_url(url: str | None, *, option: str = "--graph-http-url") -> None:
    if url is None:
        return
    _refuse_credentials(url, option)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PreflightError(f"{option} {mask_uri(url)} is not an http(s) URL")


def _option_error(option: str, value: str, exc: BaseException) -> PreflightError:
    """One line naming the option: a plug-in that cannot load says what failed and what to
    do (its own kind and spec would only repeat the option)."""
    if isinstance(exc, PluginLoadError):
        return PreflightError(f"{option} {value}: {exc.problem}; {exc.remedy}")
    return PreflightError(f"{option} {value}: {_failure_text(exc)}")


def _failure_text(exc: BaseException) -> str:
    text = getattr(exc, "description", None) or str(exc)  # a dg.Failure keeps it apart
    return " ".join(str(text or type(exc).__name__).split())


def check_runs_dir(run: RunConfig) -> None:
    """The runs directory (or the nearest directory that exists on its way, where it will be
    created) takes a file: a read-only one was found only by scored_run, after the graph
    was rebuilt. Tried for real: the mode bits do not bind root, nor tell a read-only mount."""
    runs_dir = run.paths.runs_dir(run.scoring)
    option = "--runs-dir" if run.scoring.runs_dir else "the runs directory"
    if runs_dir.exists() and not runs_dir.is_dir():
        raise PreflightError(f"{option} {runs_dir} exists and is not a directory")
    existing = next((p for p in (runs_dir, *runs_dir.parents) if p.exists()), None)
    try:
        if existing is None or not existing.is_dir():
            raise NotADirectoryError(f"{existing} is not a directory")
        fd, probe = tempfile.mkstemp(prefix=".eval-write-check-", dir=existing)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        where = "" if existing == runs_dir else f" (it would be created in {existing})"
        raise PreflightError(
            f"{option}: cannot write there{where}: {exc.strerror or exc}; choose a writable "
            "directory"
        ) from None


def check_judge_panel(specs: list[str], verdict: str) -> None:
    """Each member of `--judge-panel` as `--judge` is checked (its provider's key in the
    environment, a local model's weights there), without calling a model."""
    try:
        members = parse_panel(specs, verdict)
    except PanelError as exc:  # the config refuses these first; a caller may skip it
        raise PreflightError(f"{PANEL_OPTION}: {exc}") from None
    for member in members:
        if member.model is None:
            continue
        try:
            settings = LLMSettings.from_specs({"judge": member.model})
            LLMLayer(settings).close()
            config = settings.role("judge")
            if config.provider == "local":
                check_local_role(config.model)
        except (LLMError, ValueError) as exc:
            raise PreflightError(
                f"{PANEL_OPTION} member {member.method}={safe_spec(member.model)}: "
                f"{_failure_text(exc)}"
            ) from None


def _flag(path: tuple[str, ...]) -> str:
    """The flag of the option at `path` in RunConfig (its deepest field that has one), else
    the dotted path."""
    cls: Any = RunConfig
    found = ".".join(path)
    for name in path:
        field = getattr(cls, "model_fields", {}).get(name)
        if field is None:
            break
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        found = extra.get("cli", found)
        cls = field.annotation
    return found


def _strings(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, (*path, str(key)))
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, path)


def check_no_secret_in_options(run: RunConfig) -> None:
    """No option holds a secret, known (any form of a key in the environment) or shaped like
    one (`sk-…`, `hf_…`, `ghp_…`, a JWT…): every option is recorded in Dagster's run storage,
    the manifest, the run directory's name. The option is named; its value is not shown."""
    for path, value in _strings(run.model_dump(mode="json")):
        if looks_secret_value(value):
            raise PreflightError(
                f"{_flag(path)} holds what looks like a secret (a key or token); secrets are "
                "read only from the environment (the *_API_KEY variables, EVAL_GRAPH_PASSWORD)"
            )


def preflight(run: RunConfig) -> None:
    """Check a chain's options as its stages will build them; one line naming the option."""
    from eval_pipeline.retrieve.protocol import RetrievalEnv

    corpus, graph = run.corpus, run.graph
    # First, so no later refusal shows a secret: the addresses (naming the part that
    # carries it), then every other option.
    check_graph_uri(graph.uri)
    check_http_url(graph.http_url)
    check_graph_uri(graph.batch_uri, option="EVAL_GRAPH_BATCH_URI")
    check_no_secret_in_options(run)
    try:
        check_resolvable(corpus.upstream_spec())
    except CorpusError as exc:  # it names its field
        raise PreflightError(str(exc)) from None
    except ValueError as exc:
        raise PreflightError(f"--upstream: {exc}") from None
    try:  # the stage would refuse a sample below the floors: say so before anything runs
        check_sample_floor(corpus.upstream_spec(), corpus.sample_spec())
    except CorpusError as exc:
        raise PreflightError(str(exc)) from None
    try:  # ...and a bad record (too large, NaN, a lone surrogate) of a file nobody pinned
        check_unpinned_records(corpus.upstream_spec())
    except CorpusError as exc:
        raise PreflightError(f"--upstream {corpus.upstream}: {exc}") from None
    try:
        check_errata_option(corpus.errata_file)
    except CorpusError as exc:
        raise PreflightError(f"--errata-file: {exc}") from None
    if corpus.canaries:
        try:
            load_canaries()  # the bundled set, checked as a corpus is (a cheap read)
        except (CorpusError, OSError) as exc:
            raise PreflightError(f"--canaries: {exc} (or run with --no-canaries)") from None
    if graph.backend != "arcadedb" and graph.uri is None:
        raise PreflightError(
            f"--backend {graph.backend} needs --graph-uri: only ArcadeDB is embedded"
        )
    check_batches(corpus.batches, graph.uri, graph.batch_uri)
    try:
        check_model_roles(
            {
                "--reader": run.retrieval.reader.model,
                "--retrieval-agent": run.retrieval.agent.model,
                "--judge": run.scoring.judge.model,
                "--reconciler-model": run.reconcile.model.model,
            }
        )
    except ModelRoleError as exc:
        raise PreflightError(str(exc)) from None
    check_reader_prompt(run)
    layers = []
    try:
        try:
            layer = build.reconcile_layer(run.reconcile, run.repeat)
            layers.append(layer)
            if build.is_provider(run.reconcile):
                # Built in a scratch store and closed: its options checked, nothing kept.
                with tempfile.TemporaryDirectory(prefix="eval-preflight-") as scratch:
                    provider, _ = build.memory_provider(run.reconcile, Path(scratch), "preflight")
                    provider.close()
            else:
                build.reconciler(run.reconcile, layer)  # constructed is enough: nothing called
        except (LLMError, ReconcileError, ValueError) as exc:
            raise _option_error("--memory", run.reconcile.reconciler, exc) from None
        try:
            layer = build.retrieval_layer(run.retrieval, run.repeat)
            layers.append(layer)
            store = build.graph_store(graph)
            env = RetrievalEnv(store=store, backend=store.dialect.name, llm=layer)
            build.retriever_and_reader(run.retrieval, env, layer)
        except (LLMError, ValueError) as exc:
            raise _option_error("--retriever", run.retrieval.retriever, exc) from None
        try:
            build.answer_judge(run.scoring)
        except ValueError as exc:
            raise _option_error("--judge-method", run.scoring.method, exc) from None
        try:
            layers.append(build.llm_layer({"judge": run.scoring.judge}))
        except (LLMConfigError, LLMError, ValueError) as exc:
            raise PreflightError(
                f"--judge {run.scoring.judge.model}: {_failure_text(exc)}"
            ) from None
        check_judge_panel(run.scoring.judge_panel, run.scoring.verdict)
        check_runs_dir(run)
    finally:
        for layer in layers:
            if layer is not None:
                layer.close()
