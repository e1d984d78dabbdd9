"""`--judge-panel` through the real chain: two configurations on a small sample of the bundled
corpus, each scored under a panel of `match` (no model) and the reference prompt on a scripted
OpenAI-compatible judge on loopback; `compare` then shows the panel's sensitivity band, in
its text and its HTML report. Offline: no provider is reached."""

from __future__ import annotations

import json
import re

import pytest

from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline_tests.wire_server import RecordedRequest, ScriptedReply, WireServer

WORD = re.compile(r"[a-z0-9]{4,}")


def _word_judge(request: RecordedRequest) -> ScriptedReply:
    """Yes when the response shares a word of four letters or more with the correct answer:
    a judge that disagrees with the rules now and then, as a second judge does."""
    text = request.last_user_text.lower()
    answer = text.split("correct answer:")[-1].split("assistant's response:")[0]
    response = text.split("assistant's response:")[-1]
    verdict = "yes" if set(WORD.findall(answer)) & set(WORD.findall(response)) else "no"
    return ScriptedReply(text=json.dumps({"verdict": verdict, "reason": "scripted"}))


@pytest.mark.slow
def test_a_panel_compare_runs_offline_and_shows_the_band(chain):
    with WireServer(responder=_word_judge) as server:
        model = f"openai_compatible:judge-model@{server.openai_base_url}"
        panel = f"match,reference={model}"
        env = {"OPENAI_API_KEY": "sk-test-panel"}
        runs = []
        for label, extra in (("raw", ("--memory", "none")), ("extractive", ())):
            res = chain.run(
                "--sample", "6", "--judge-panel", panel, "--label", label, *extra, env=env
            )
            assert res.returncode == 0, res.stderr[-3000:]
            runs.append(res.run_dir)
        assert server.request_count > 0  # the model member really judged
    ref = f"reference={model}"
    for run_dir in runs:
        rows = list(read_jsonl(run_dir / "results.jsonl"))
        assert all(set(r["judge_panel"]) == {"match", ref} for r in rows)
        assert all(set(r["panel_covered"]) == {"match", ref} for r in rows)
        manifest = json.loads((run_dir / "manifest.json").read_text())
        pins = manifest["pins"]["judge"]["panel"]
        assert [p["member"] for p in pins] == ["match", ref]
        assert pins[1]["role"]["provider"] == "openai_compatible"
        summary = json.loads((run_dir / "summary.json").read_text())
        assert set(summary["tiers"]["1"]["judge_panel"]["members"]) == {"match", ref}
        assert "<h2>Judge panel</h2>" in (run_dir / "report.html").read_text()
    out_dir = chain.root / "panel-comparison"
    cmp = chain.cli("compare", str(runs[0]), str(runs[1]), "--out", str(out_dir))
    assert cmp.returncode == 0, cmp.stderr
    assert f"judge panel (2 members: match, {ref}):" in cmp.stdout
    assert re.search(r"tier 1 sensitivity band [-+]\d+\.\d pp \.\. [-+]\d+\.\d pp", cmp.stdout)
    assert "panel splits on: base " in cmp.stdout
    html = (out_dir / "comparison.html").read_text()
    assert "Judge panel: sensitivity band" in html
    comparison = json.loads((out_dir / "comparison.json").read_text())
    assert comparison["judge_panel"]["band"] is True
    assert [m["member"] for m in comparison["judge_panel"]["tiers"][0]["members"]] == [
        "match",
        ref,
    ]
