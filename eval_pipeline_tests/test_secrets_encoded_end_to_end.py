"""No secret is written, in any encoding (issue 28, finding 4): every role runs against an
endpoint that echoes the key back base64-encoded (whole, and a part of it), reversed, cut
into 15-character chunks, with zero-width spaces interleaved and as `\\u` escapes. Then every
file the run wrote — the state dir (Dagster's SQLite run and event storage, compute logs, the
LLM cache, the artifacts, the bundle with results.jsonl, hypotheses.jsonl, report.html) and
the embedded graph's own files — and stdout and stderr are searched for every form, as
written and as JSON writes it (escaped once, and twice: Dagster's event log nests JSON).

The probe found each form in the cache, the graph, the artifacts, results.jsonl,
hypotheses.jsonl and report.html. The keys are random, as real keys are."""

from __future__ import annotations

import json

import pytest

from eval_pipeline_tests.echo_server import CHUNK, encoded_echo, encodings, every_role_config
from eval_pipeline_tests.wire_server import WireServer

pytestmark = pytest.mark.slow  # a whole chain

SECRETS = {
    "OPENAI_API_KEY": "sk-proj-Q7fT2mZp9LxV4bNc8RsW1yHd6KjG3eUa5oPi0tYr",
    "ANTHROPIC_API_KEY": "sk-ant-api03-Xw4Rt9LmQ2zVb7Nc1Hd8Ks5Jp3Gf6Ya0Ue",
}
RUN = 16  # a run this long of an encoded form is a leak


def needles(secret: str) -> dict[str, set[bytes]]:
    """What a leak of `secret` looks like in a file, per encoding: runs of each form, and
    each 15-character chunk whole; as written and JSON-escaped once and twice."""
    out: dict[str, set[bytes]] = {}
    for name, form in encodings(secret).items():
        if name == "chunks":
            pieces = [p for p in form.split(" ") if len(p) == CHUNK]
        else:
            pieces = [form[i : i + RUN] for i in range(len(form) - RUN + 1)]
        written = set()
        for piece in pieces:
            once = json.dumps(piece)[1:-1]
            written |= {piece, once, json.dumps(once)[1:-1]}
        out[name] = {w.encode() for w in written}
    return out


def leaks_in(data: bytes, secret: str) -> list[str]:
    return [name for name, found in needles(secret).items() if any(n in data for n in found)]


def test_an_endpoint_echoing_the_key_encoded_leaves_no_form_of_it_anywhere(persistent_chain):
    chain = persistent_chain  # Dagster's SQLite storage on disk, as a user's, so it is searched too
    with WireServer(responder=encoded_echo) as server:
        cfg = chain.root / "run.yaml"
        cfg.write_text(every_role_config(server, chain.state / "runs"))
        res = chain.run("--config", str(cfg), env=SECRETS)
        echoed = server.request_count
    assert res.returncode == 0, res.stderr[-3000:]
    assert echoed > 0
    run_dir = res.run_dir
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert all("[REDACTED]" in (r["answer"] or "") for r in rows)  # the reader's echo, blanked
    assert (run_dir / "report.html").is_file() and (run_dir / "hypotheses.jsonl").is_file()
    written = chain.written_files()
    database = chain.graph_dir / "databases" / chain.graph["database"]
    assert any(p.is_relative_to(database) for p in written)
    assert any(p.suffix == ".db" or "sqlite" in p.name for p in written)  # Dagster's storage
    leaks = []
    for secret_name, secret in SECRETS.items():
        for stream, text in (("stdout", res.stdout), ("stderr", res.stderr)):
            leaks += [f"{secret_name} {how} in {stream}" for how in leaks_in(text.encode(), secret)]
        for path in written:
            found = leaks_in(path.read_bytes(), secret)
            leaks += [f"{secret_name} {how} in {path}" for how in found]
    print(f"secrets found: {len(leaks)}")  # the figure issue 28's note quotes
    assert leaks == []
