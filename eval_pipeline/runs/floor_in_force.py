"""The noise floor in force for a run's configuration, read, never rewritten.

A floor changes only when someone asks for it: `eval-pipeline calibrate RUN...`, or
`eval-pipeline run --repeat N` (the chain calibrates from its own N repeats at its end). An
ordinary run's `noise_floor` asset reads the floor stored for its configuration
(`<runs_dir>/noise_floors/<key>.json`, or `calibration.out`) and reports it, and says when more
independent repeats of the configuration exist than the floor was calibrated on, with the
`calibrate` command that would use them. So a floor calibrated on 3 repeats stays the floor of
3 repeats however many ordinary runs follow.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from eval_pipeline.runs.calibrate import NoiseFloor, floor_path_for, load_noise_floor
from eval_pipeline.runs.load import RunBundle
from eval_pipeline.runs.select import independent_repeats_of

MIN_REPEATS = 2


class FloorInForce(BaseModel):
    path: str
    floor: NoiseFloor | None
    repeats: list[str]  # independent repeats of the configuration in the runs dir, oldest first
    unused: list[str]  # those the floor was not calibrated on

    @property
    def calibrated_on(self) -> int:
        return len(self.floor.runs) if self.floor is not None else 0

    def calibrate_command(self) -> str:
        return "eval-pipeline calibrate " + " ".join(self.repeats)

    def note(self) -> str:
        """One line: the floor in force (or none), and what an explicit calibrate could add."""
        if self.floor is None:
            head = f"no noise floor for this configuration ({self.path})"
            if len(self.repeats) < MIN_REPEATS:
                return (
                    f"{head}; calibration needs at least {MIN_REPEATS} repeats: "
                    "`eval-pipeline run --repeat 3` (same options)"
                )
            return f"{head}; {len(self.repeats)} repeats exist: `{self.calibrate_command()}`"
        head = (
            f"noise floor in force: {self.path}, calibrated {self.floor.created_at} on "
            f"{self.calibrated_on} repeats"
        )
        if not self.unused:
            return head
        return (
            f"{head}; {len(self.unused)} more independent repeat(s) of this configuration exist, "
            f"unused until asked: `{self.calibrate_command()}`"
        )


def floor_in_force(runs_dir: Path, run: RunBundle, out: str | Path | None = None) -> FloorInForce:
    """What the floor of `run`'s configuration is now; reading only (NoiseFloorError if the
    stored file cannot be read)."""
    path = Path(out).expanduser() if out else floor_path_for(runs_dir, run)
    floor = load_noise_floor(path) if path.is_file() else None
    repeats, _skipped = independent_repeats_of(runs_dir, run)
    used = {Path(p).name for p in (floor.runs if floor is not None else [])}
    return FloorInForce(
        path=str(path),
        floor=floor,
        repeats=[str(r.path) for r in repeats],
        unused=[r.name for r in repeats if r.name not in used],
    )
