"""Repeats are fresh samples; floors belong to their configuration.

Calibration refuses repeats that replayed one another (read from the manifests' `repeat`
record and LLM accounting, shaped exactly as the LLM layer exports it), floors are stored one
file per configuration, and `compare` finds the one that fits by itself.
"""

from __future__ import annotations

import pytest

from eval_pipeline.runs import cli
from eval_pipeline.runs.calibrate import (
    NOISE_FLOOR_FILE,
    CalibrationRefused,
    calibrate,
    floor_key,
    floor_path_for,
    load_noise_floor,
    save_noise_floor,
)
from eval_pipeline.runs.compare import compare, find_noise_floor
from eval_pipeline.runs.load import load_run
from eval_pipeline.runs.select import independent_repeats_of
from eval_pipeline_tests.runs.synthetic import (
    BASE_PINS,
    hand_floor,
    outcomes,
    repeat_of,
    role_usage,
    set_pin,
    usage_snapshot,
    write_run,
)

# Three repeats over 10 questions, floor 20 pp (see test_calibrate.REPEATS).
REPEATS = [
    [True] * 8 + [False, False],
    [True] * 7 + [False, False, False],
    [True] * 8 + [True, False],
]


def _usage(judge=None, retrieval=None, reconcile=None):
    return {"retrieval": retrieval, "reconcile": reconcile, "judge": judge}


def _repeat_runs(runs_dir, salt="s1", *, pins=None, values=REPEATS, **usage_kw):
    """`run --repeat N` as the lead wires it: repeat k under identity "<salt>/k", every LLM
    call fresh (no cache hit), a graph reconciled once and shared."""
    return [
        write_run(
            runs_dir,
            outcomes("q", v),
            label=f"{salt}-repeat{k}",
            pins=pins,
            repeat=repeat_of(salt, k, len(values)),
            llm_usage=_usage(judge=usage_snapshot(identity=f"{salt}/{k}", **usage_kw)),
        )
        for k, v in enumerate(values, start=1)
    ]


def _refusal(runs) -> CalibrationRefused:
    with pytest.raises(CalibrationRefused) as err:
        calibrate(runs)
    return err.value


# --- calibrate refuses repeats that are not independent samples ------------------------------


def test_calibrate_refuses_two_runs_with_the_same_identity_and_accepts_distinct_ones(
    tmp_path, capsys
):
    first, second, _ = _repeat_runs(tmp_path / "a")
    # A second bundle under repeat 1's identity (a re-run of repeat 1 that replayed it).
    again = write_run(
        tmp_path / "a",
        outcomes("q", REPEATS[0]),
        repeat=repeat_of("s1", 1),
        llm_usage=_usage(judge=usage_snapshot(identity="s1/1", hits=10, replayed=10)),
    )
    refusal = _refusal([first, again])
    head, *details = str(refusal).splitlines()
    assert head.startswith("refusing to calibrate: the repeats are not independent samples")
    assert "silent 0" in head
    assert any("'s1/1'" in d and first.name in d and again.name in d for d in details)
    # Even with no cache hit at all, one identity twice is one sample, not two.
    twin = write_run(
        tmp_path / "a",
        outcomes("q", REPEATS[1]),
        repeat=repeat_of("s1", 1),
        llm_usage=_usage(judge=usage_snapshot(identity="s1/1")),
    )
    assert "'s1/1'" in str(_refusal([first, twin]))
    # The CLI: exit 3, the reason on the first line, details after it.
    assert cli.main(["calibrate", str(first), str(again)]) == cli.EXIT_REFUSED
    err = capsys.readouterr().err.splitlines()
    assert "not independent samples" in err[0] and any("'s1/1'" in line for line in err[1:])

    # Distinct identities: independent samples, and the floor says so.
    runs = _repeat_runs(tmp_path / "b")
    floor = calibrate(runs)
    assert floor.tiers["1"].coverage.floor_pp == pytest.approx(20.0)
    assert floor.sample_identities == ["s1/1", "s1/2", "s1/3"]
    assert "distinct sample identities (s1/1, s1/2, s1/3)" in floor.independence
    assert floor.reconcile_sampled is False and "reconciliation" not in floor.independence

    # A reproduced repeat (its answers replayed from its own earlier run: the identity is in
    # every key, so they cannot be another repeat's) is accepted in place of the original.
    assert calibrate([again, second]).sample_identities == ["s1/1", "s1/2"]


def test_calibrate_refuses_replays_it_cannot_tell_from_another_run(tmp_path):
    def plain(**usage):
        return write_run(tmp_path, outcomes("q", REPEATS[0]), llm_usage=_usage(**usage))

    fresh = plain(judge=usage_snapshot())
    # Two plain runs sharing the default cache: the second replayed the first's judge.
    replayed = plain(judge=usage_snapshot(hits=10, replayed=10))
    refusal = _refusal([fresh, replayed])
    assert "cached LLM answers replayed from another run" in str(refusal).splitlines()[0]
    (detail,) = refusal.details
    assert detail.startswith(f"{replayed.name}: judge/judge: 10 of 10 call(s) replayed")
    assert "no sample identity" in detail

    # Other roles count too: a reader replaying in the retrieval stage.
    reader = plain(retrieval=usage_snapshot("reader", hits=4, replayed=4))
    assert "retrieval/reader" in str(_refusal([fresh, reader]))
    # Accounting from before replay counting: hits whose writer is unknown.
    legacy = plain(judge=usage_snapshot(hits=3, legacy=True))
    assert "from before replay counting" in str(_refusal([fresh, legacy]))
    # One stage materialization reused by two runs (the same accounting origin).
    judge = usage_snapshot(origin="dagster-run-42")
    a, b = plain(judge=judge), plain(judge=judge)
    assert "one and the same materialization" in str(_refusal([a, b]))

    # Accepted: fresh calls (hits on the run's own entries only), and fully offline runs.
    own_hits = plain(judge=usage_snapshot(hits=2, replayed=0))
    floor = calibrate([fresh, own_hits])
    assert floor.independence.startswith("fresh LLM calls")
    offline = [plain(), plain()]
    floor = calibrate(offline)
    assert floor.tiers["1"].coverage.floor_pp == 0.0
    assert floor.independence.startswith("deterministic")


def test_a_shared_graph_is_not_a_replay_unless_repeats_include_reconciliation(tmp_path):
    # The reconciler reports one RoleUsage; built once, its later hits replay the first build.
    reconcile = role_usage("reconciler", hits=5, replayed=5)

    def rep(k, includes):
        return write_run(
            tmp_path,
            outcomes("q", REPEATS[k - 1]),
            repeat=repeat_of("s9", k, includes_reconcile=includes),
            llm_usage=_usage(judge=usage_snapshot(identity=f"s9/{k}"), reconcile=reconcile),
        )

    floor = calibrate([rep(1, False), rep(2, False)])
    assert floor.reconcile_sampled is False
    assert "LLM reconciliation shared, not sampled" in floor.independence
    # Repeats that say they include reconciliation must have sampled it afresh.
    refusal = _refusal([rep(1, True), rep(2, True)])
    assert any("reconcile/reconciler" in d for d in refusal.details)
    # ... which they do under their own identity.
    runs = [
        write_run(
            tmp_path,
            outcomes("q", REPEATS[k - 1]),
            repeat=repeat_of("s8", k, includes_reconcile=True),
            llm_usage=_usage(
                judge=usage_snapshot(identity=f"s8/{k}"),
                reconcile=role_usage("reconciler", identity=f"s8/{k}"),
            ),
        )
        for k in (1, 2)
    ]
    assert calibrate(runs).reconcile_sampled is True


def test_default_calibration_set_leaves_out_replays(tmp_path):
    original = _repeat_runs(tmp_path, values=REPEATS[:2])
    plain_replay = write_run(
        tmp_path,
        outcomes("q", REPEATS[2]),
        llm_usage=_usage(judge=usage_snapshot(hits=10, replayed=10)),
    )
    rerun = write_run(  # repeat 2 re-run: reproduces it, so the older one is left out
        tmp_path,
        outcomes("q", REPEATS[1]),
        repeat=repeat_of("s1", 2),
        llm_usage=_usage(judge=usage_snapshot(identity="s1/2", hits=10, replayed=10)),
    )
    kept, skipped = independent_repeats_of(tmp_path, load_run(rerun))
    assert [r.name for r in kept] == [original[0].name, rerun.name]
    assert len(skipped) == 2
    assert any(s.startswith(plain_replay.name) and "no sample identity" in s for s in skipped)
    assert any(s.startswith(original[1].name) and "'s1/2'" in s for s in skipped)
    calibrate(kept)  # what is left is accepted


# --- floors per configuration ----------------------------------------------------------------


def test_floors_of_two_configurations_do_not_overwrite_one_another(tmp_path, capsys):
    runs_dir = tmp_path / "runs"
    wide = _repeat_runs(runs_dir, "w")  # top_k 10: floor 20 pp
    narrow_pins = set_pin(BASE_PINS, "top_k", 3)
    narrow = _repeat_runs(runs_dir, "n", pins=narrow_pins, values=[REPEATS[0]] * 2)  # 0 pp

    assert cli.main(["calibrate", *map(str, wide)]) == 0
    wide_path = floor_path_for(runs_dir, load_run(wide[0]))
    assert f"noise floor: {wide_path}" in capsys.readouterr().out
    assert cli.main(["calibrate", *map(str, narrow)]) == 0
    narrow_path = floor_path_for(runs_dir, load_run(narrow[0]))
    assert f"noise floor: {narrow_path}" in capsys.readouterr().out

    assert wide_path != narrow_path and wide_path.parent == narrow_path.parent
    assert sorted(p.name for p in (runs_dir / "noise_floors").iterdir()) == sorted(
        [wide_path.name, narrow_path.name]
    )
    assert not (runs_dir / NOISE_FLOOR_FILE).exists()  # no shared file any more
    wide_floor, narrow_floor = load_noise_floor(wide_path), load_noise_floor(narrow_path)
    assert wide_floor.tiers["1"].coverage.floor_pp == pytest.approx(20.0)
    assert narrow_floor.tiers["1"].coverage.floor_pp == 0.0
    assert (wide_floor.configuration["top_k"], narrow_floor.configuration["top_k"]) == (10, 3)
    assert wide_floor.key == floor_key(load_run(wide[0])) == wide_path.stem
    # The key is the configuration's, whichever of its repeats is asked.
    assert {floor_path_for(runs_dir, load_run(r)) for r in wide} == {wide_path}


def test_compare_finds_its_floor_without_noise_floor(tmp_path, capsys):
    runs_dir = tmp_path / "runs"
    all_covered, some_lost = [True] * 20, [False] * 8 + [True] * 12
    base = load_run(write_run(runs_dir, outcomes("q", all_covered), label="base"))
    cand_pins = set_pin(BASE_PINS, "retriever.retriever", "agent")  # what the team changed
    cand = load_run(write_run(runs_dir, outcomes("q", some_lost), pins=cand_pins, label="cand"))
    # An old shared file is not trusted by default, even with matching pins.
    save_noise_floor(hand_floor(base, 5.0), runs_dir / NOISE_FLOOR_FILE)
    floor, note = find_noise_floor(runs_dir, base, cand)
    assert floor is None and note.startswith("NOT CALIBRATED")
    assert f"{runs_dir / NOISE_FLOOR_FILE} ignored" in note
    assert compare(base, cand, runs_dir=runs_dir).calibrated is False

    # Only the candidate's configuration is calibrated: its floor decides, and says so.
    cand_floor = hand_floor(cand, 6.0)
    cand_path = save_noise_floor(cand_floor, floor_path_for(runs_dir, cand))
    floor, note = find_noise_floor(runs_dir, base, cand)
    assert floor == cand_floor and note.startswith(f"{cand_path} (the candidate's configuration")
    # The base's configuration, once calibrated, comes first.
    base_path = save_noise_floor(hand_floor(base, 5.0), floor_path_for(runs_dir, base))
    floor, note = find_noise_floor(runs_dir, base, cand)
    assert floor.floor_for("1") == 5.0 and note.startswith(f"{base_path} (the base's")
    c = compare(base, cand, runs_dir=runs_dir)
    assert c.calibrated and c.verdict == "REGRESSED" and c.noise_floor == str(base_path)

    # The CLI does the same without --noise-floor, prints which floor it used, and fails
    # on the regression (exit 5).
    assert cli.main(["compare", str(base.path), str(cand.path)]) == 5
    out = capsys.readouterr().out
    assert f"noise floor: {base_path} (the base's configuration" in out
    assert "verdict: REGRESSED" in out
    # A file at the right place whose content is another configuration's is not used.
    save_noise_floor(cand_floor, base_path)
    floor, note = find_noise_floor(runs_dir, base, cand)
    assert floor == cand_floor and f"{base_path} not used" in note
    # An explicit --noise-floor still works (and is checked against the runs' pins).
    given = save_noise_floor(hand_floor(base, 50.0), tmp_path / "given.json")
    assert cli.main(["compare", str(base.path), str(cand.path), "--noise-floor", str(given)]) == 0
    assert "verdict: INCONCLUSIVE" in capsys.readouterr().out  # 40 pp is within 50 pp
