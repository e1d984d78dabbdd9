"""A run with a local judge decides its answer verdicts with the model unless told otherwise
(issue 38): `eval-pipeline run --judge local:…` on two questions of the bundled sample, in this
process, with the real small model behind its real llama.cpp server and the real embedded
graph; then the same run with `--judge-verdict match`. The judge's calls are counted where
every model call is counted, the LLM layer's accounting in the manifest.

Kept short as the other real-model tests are: two questions, no canaries (each would be
judged too), the offline reader. The second run replays deepeval's calls from the first's
cache, so it costs seconds; what it still counts is what it asked."""

from __future__ import annotations

import json

from eval_pipeline.corpus.jsonl import read_jsonl

QUESTIONS = "2"


def _run(chain, local_spec: str, label: str, *extra: str):
    res = chain.run(
        "--judge", local_spec, "--sample", QUESTIONS, "--no-canaries", "--label", label, *extra
    )
    # A reply the small model gets wrong leaves a metric unscored: incomplete (4), not broken.
    assert res.returncode in (0, 4), res.stderr[-3000:]
    manifest = json.loads((res.run_dir / "manifest.json").read_text())
    rows = list(read_jsonl(res.run_dir / "results.jsonl"))
    return res, manifest, rows


def test_a_local_judge_decides_the_verdicts_unless_told_otherwise(chain, local_spec, local_model):
    default, d_manifest, d_rows = _run(chain, local_spec, "judge-default")
    asked, a_manifest, a_rows = _run(chain, local_spec, "judge-match", "--judge-verdict", "match")

    # The judge the runs really reached: the local provider, the model named by its weights.
    for manifest in (d_manifest, a_manifest):
        usage = manifest["llm_usage"]["judge"]["roles"]["judge"]
        assert usage["provider"] == "local"
        assert manifest["pins"]["judge"]["role"]["weights"]["sha256"] == local_model.sha256
    d_usage = d_manifest["llm_usage"]["judge"]["roles"]["judge"]
    a_usage = a_manifest["llm_usage"]["judge"]["roles"]["judge"]
    # The first run replayed nothing of another run: every call went to the llama.cpp server,
    # but for one it had asked itself already (deepeval's rubric steps, the same per question).
    assert d_usage["cache_replayed"] == 0
    assert d_usage["provider_requests"] + d_usage["cache_hits"] >= d_usage["calls"] > 0
    print(f"\njudge calls: default {d_usage}\n  match asked {a_usage}")

    # Which method decided and why, in the manifest and the printed summary.
    assert d_manifest["pins"]["judge"]["verdict"]["method"] == "reference"
    assert d_manifest["pins"]["judge"]["verdict"]["chosen"] == "default"
    assert (
        f"judge {local_spec}, verdict reference (LongMemEval's prompt; the default with a "
        "judge model)" in default.stdout
    )
    assert a_manifest["pins"]["judge"]["verdict"]["chosen"] == "asked"
    assert f"judge {local_spec}, verdict match (the rules, no model; asked for)" in asked.stdout

    # The count: the default asked the model once per answer for its verdict, on top of
    # deepeval's metrics (the same calls in both runs); `match`, asked for, never did.
    answered = [r for r in d_rows if r["answer"] is not None]
    assert len(d_rows) == len(a_rows) == int(QUESTIONS) and answered
    assert d_usage["calls"] - a_usage["calls"] == len(answered)
    if d_usage["failures"] == 0:  # every reply cached: `match` sent the server nothing new
        assert a_usage["provider_requests"] == 0 and a_usage["cache_hits"] == a_usage["calls"]
    # ... and the verdicts say who decided: the model (its reason, or unscored saying it
    # failed), then the rules.
    for row in d_rows:
        verdict = row["metrics"]["answer_judge"]
        rules = verdict["reason"].startswith(("rules:", "coverage "))
        assert not rules, verdict
        assert verdict["score"] is not None or verdict["reason"] == "judge failed", verdict
    for row in a_rows:
        verdict = row["metrics"]["answer_judge"]
        assert verdict["score"] in (0.0, 1.0), verdict
        assert verdict["reason"].startswith(("rules:", "coverage ")), verdict
