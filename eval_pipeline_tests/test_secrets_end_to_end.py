"""No secret is ever written (issue 13): every role runs against a local endpoint that echoes
the credentials back in its answers; then everything the run wrote — the state dir with
Dagster's SQLite storage and compute logs, the LLM cache, the artifacts, the embedded graph's
own files, the bundle — and stdout and stderr are searched for each secret and for every
16-character run of it. Zero hits."""

from __future__ import annotations

import json

import pytest

from eval_pipeline_tests.echo_server import echo, every_role_config
from eval_pipeline_tests.wire_server import WireServer

# A whole chain against echoing endpoints: the full suite runs it, `make test-fast` not.
pytestmark = pytest.mark.slow

SECRETS = {
    "OPENAI_API_KEY": "sk-test-openai-ECHOCANARY-1111aaaa2222",
    "ANTHROPIC_API_KEY": "sk-ant-test-anthropic-ECHOCANARY-3333bbbb",
    "EVAL_GRAPH_PASSWORD": "graph-pass-ECHOCANARY-5555cccc6666",
}
RUN_MIN = 16


def fragments(secret: str) -> set[str]:
    return {secret[i : i + RUN_MIN] for i in range(len(secret) - RUN_MIN + 1)}


def hits_in(data: bytes, secret: str) -> bool:
    return any(f.encode() in data for f in fragments(secret))


def test_every_role_against_an_echoing_endpoint_leaves_no_secret_anywhere(chain):
    with WireServer(responder=echo) as server:
        cfg = chain.root / "run.yaml"
        cfg.write_text(every_role_config(server, chain.state / "runs"))
        res = chain.run("--config", str(cfg), env=SECRETS)
        echoed = server.request_count
    assert res.returncode == 0, res.stderr[-3000:]
    # Every role really met the echo, and what it echoed reached the outputs redacted.
    assert echoed > 0
    run_dir = res.run_dir
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert all("[REDACTED]" in (r["answer"] or "") for r in rows)  # reader
    judged = [r["metrics"]["answer_judge"] for r in rows if r["metrics"]["answer_judge"]["score"]]
    assert judged and all("[REDACTED]" in m["reason"] for m in judged)  # judge
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["pins"]["reconciler"]["name"] == "llm"  # reconciler
    assert manifest["pins"]["retriever"]["retriever"] == "graph_agent"  # retrieval agent
    # Everything the run wrote: the state dir (Dagster's storage and compute logs, the LLM
    # cache, the artifacts, the bundle) and the embedded graph server's own files (the
    # session's server: this chain's database is on it).
    written = chain.written_files()
    database = chain.graph_dir / "databases" / chain.graph["database"]
    assert any(p.is_relative_to(database) for p in written)
    leaks = []
    for secret_name, secret in SECRETS.items():
        for stream, text in (("stdout", res.stdout), ("stderr", res.stderr)):
            if hits_in(text.encode(), secret):
                leaks.append(f"{secret_name} in {stream}")
        for path in written:
            if hits_in(path.read_bytes(), secret):
                leaks.append(f"{secret_name} in {path}")
    assert leaks == []
    # Everything the stages wrote is private.
    for path in (chain.state / "artifacts").rglob("*"):
        assert path.stat().st_mode & 0o077 == 0, path
    for path in (chain.state / "runs").rglob("*"):
        assert path.stat().st_mode & 0o077 == 0, path
