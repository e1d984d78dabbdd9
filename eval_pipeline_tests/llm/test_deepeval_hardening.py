"""deepeval hardening is in effect, proven on deepeval itself: a judged question through its
real metrics, in a fresh process, sends no telemetry, writes no file, loads no .env, and
connects nowhere but the local judge."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from eval_pipeline.settings import REPO_DIR

SCRIPT = textwrap.dedent(
    """
    import json, os, socket, sys
    connects = []
    _connect = socket.socket.connect
    def connect(self, address):  # records where the process connects; changes nothing
        connects.append(list(address) if isinstance(address, tuple) else str(address))
        return _connect(self, address)
    socket.socket.connect = connect

    from eval_pipeline_tests.wire_server import WireServer
    from eval_pipeline.score.judges import judge_batch
    from eval_pipeline_tests.score.test_judges import _answers, _golden, _layer
    from pathlib import Path

    tmp = Path(sys.argv[1])
    with WireServer(responder=_answers) as server:
        layer = _layer(server, tmp / "cache")
        judged = judge_batch(layer, [(_golden("q1"), ["I bought a blue bike"], "It was blue.")])
        layer.close()
        port = server.port
    import deepeval.telemetry as telemetry
    from deepeval.utils import is_read_only_env
    print(json.dumps({
        "scores": {k: m.score for k, m in judged[0].items()},
        "opt_out": telemetry.telemetry_opt_out(),
        "backend": type(telemetry.get_backend()).__name__,
        "read_only": is_read_only_env(),
        "canary": os.environ.get("EVAL_DOTENV_CANARY"),
        "connects": connects,
        "port": port,
    }))
    """
)


def test_a_judged_question_leaves_no_trace_outside_the_run(tmp_path):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    (tmp_path / "cache").mkdir()
    # A .env deepeval would load if dotenv were on (and telemetry switched back on by it).
    (work / ".env").write_text("EVAL_DOTENV_CANARY=loaded\nDEEPEVAL_TELEMETRY_OPT_OUT=0\n")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("DEEPEVAL_") and k != "CONFIDENT_API_KEY"
    }
    env.update(HOME=str(home), PYTHONPATH=str(REPO_DIR), JUDGE_KEY="sk-test-hardening-1234")
    res = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["scores"]["answer_judge"] == 1.0  # deepeval's metrics really ran
    assert out["scores"]["contextual_recall"] is not None
    assert out["opt_out"] is True and out["backend"] == "NoopBackend"
    assert out["read_only"] is True
    assert out["canary"] is None  # no .env was loaded
    assert all(c[0] == "127.0.0.1" and c[1] == out["port"] for c in out["connects"]), out
    assert "imported before harden_deepeval_env" not in res.stderr
    # Nothing written outside the run's own cache: no .deepeval folder, no telemetry file.
    assert sorted(p.name for p in work.iterdir()) == [".env"]
    assert list(home.iterdir()) == []
