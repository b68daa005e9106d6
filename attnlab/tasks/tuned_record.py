"""``tuned.json``: what an ``attnlab sweep tuned`` study was asked, written before its first
trial and again, with each reader's best trial and the sha256 of its ``trials.csv``, once
the studies are done. A study's folder belongs to the settings it was started with:

- the same command again resumes it (nothing that is complete runs again);
- other settings (search space, ``tune.steps``, ``tune.minutes``, readers, trials, sampler,
  objective, seeds, training overrides) are refused in one line naming what differs, since
  the trials already there were drawn with the old ones and ``tuned.json`` would claim the
  new;
- a folder that holds something else (a plain sweep's jobs) is refused: a study is not mixed
  into it.

And, when the study is stopped with Ctrl-C, the command that resumes it.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from attnlab.config.overrides import override_key
from attnlab.errors import UserError
from attnlab.io import file_digest, write_json
from attnlab.runs.studydir import MANIFEST, STUDY, TRIALS_CSV, WINNERS

PROG = "attnlab sweep tuned"
# Overrides that change how a trial runs, not what it computes: a study resumes with others.
HOW_IT_RUNS = ("hydra", "train.progress", "train.threads")
# tuned.json's settings, as the refusal names them
SETTINGS = {
    "readers": "readers (model=)",
    "axes": "search space",
    "steps": "tune.steps",
    "trial_steps": "steps per trial",
    "minutes": "minutes per trial and re-run (tune.minutes)",
    "trials": "tune.trials",
    "sampler": "tune.sampler",
    "sampler_seed": "tune.sampler_seed",
    "objective": "train.objective",
    "trial_seeds": "the trials' seeds",
    "rerun_seeds": "the re-runs' seeds (tune.seeds, tune.first_seed)",
    "plain": "training overrides",
}
# Settings a tuned.json written before them lacks, with the value every such study had
# (compared, not skipped: a study of steps asked again with tune.minutes is another study).
ADDED_LATER = {"minutes": None}


def settings(p: Any) -> dict[str, Any]:
    """What the study computes, from its plan (``attnlab.tasks.tuned_plan.Plan``)."""
    return {
        "readers": p.readers,
        "trials": p.tune.trials,
        "sampler": p.tune.sampler,
        "sampler_seed": p.tune.sampler_seed,
        "steps": p.tune.steps,
        "trial_steps": p.trial_steps,
        "minutes": p.minutes,
        "objective": p.objective,
        "axes": p.axes,
        "dropped": p.dropped,
        "trial_seeds": p.trial_seeds,
        "rerun_seeds": p.rerun_seeds,
        "plain": p.plain,
    }


def _comparable(name: str, value: Any) -> Any:
    if name == "minutes" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)  # 2 and 2.0 are one budget
    if name in ("axes", "readers"):
        return sorted(value)
    if name == "plain":
        return sorted(a for a in value if not override_key(a).startswith(HOW_IT_RUNS))
    return value


def _shown(name: str, value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ",".join(map(str, value)) if name == "readers" else " ".join(map(str, value))
    return str(value)


def differences(recorded: dict[str, Any], asked: dict[str, Any]) -> list[str]:
    """'NAME X there, Y here' for each setting that differs (of a list of overrides, the
    ones only one side has); a setting an older tuned.json lacks is not compared."""
    out = []
    recorded = {**ADDED_LATER, **recorded}
    for name, label in SETTINGS.items():
        if name not in recorded:
            continue
        there, here = _comparable(name, recorded[name]), _comparable(name, asked[name])
        if there == here:
            continue
        if name in ("axes", "plain"):
            there, here = [a for a in there if a not in here], [a for a in here if a not in there]
        there_text, here_text = _shown(name, there) or "none", _shown(name, here) or "none"
        out.append(f"{label} {there_text} there, {here_text} here")
    return out


def check_root(p: Any) -> None:
    """Refuse a folder this study cannot be written into: another study's (other settings),
    or a folder of something else."""
    root = p.root
    manifest = root / MANIFEST
    if manifest.is_file():
        try:
            recorded = json.loads(manifest.read_text(encoding="utf-8"))
            if not isinstance(recorded, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as err:
            raise UserError(
                f"{manifest}: unreadable ({err}); choose another hydra.sweep.dir"
            ) from err
        differ = differences(recorded, settings(p))
        if differ:
            raise UserError(
                f"{root} holds a study with other settings ({MANIFEST}): {'; '.join(differ)}; "
                "resume it with its own settings, or give this study another hydra.sweep.dir"
            )
        return
    if root.exists() and not root.is_dir():
        raise UserError(f"hydra.sweep.dir={root}: a file, not a folder")
    held = sorted(c.name for c in root.iterdir()) if root.is_dir() else []
    if held:
        shown = ", ".join(held[:4]) + (f" and {len(held) - 4} more" if len(held) > 4 else "")
        raise UserError(
            f"hydra.sweep.dir={root} holds {shown} but no {MANIFEST}: not a study of {PROG} "
            "(a plain sweep?); give the study a folder of its own"
        )


def write_manifest(p: Any, best: dict[str, dict[str, Any]]) -> Path:
    """tuned.json: the settings, where each reader's files are, its best trial, and the
    sha256 of each reader's trials.csv as the study wrote it (the report checks it)."""
    tables = {}
    for reader in p.readers:
        table = p.root / STUDY / reader / TRIALS_CSV
        if table.is_file():
            tables[reader] = file_digest(table)
    data = {
        **settings(p),
        "studies": {r: f"{STUDY}/{r}" for r in p.readers},
        "winners": {r: f"{WINNERS}/{r}" for r in p.readers},
        "best": {
            r: {k: b.get(k) for k in ("trial", "dir", "value", "overrides")}
            for r, b in best.items()
        },
        "tables": tables,
    }
    p.root.mkdir(parents=True, exist_ok=True)
    return write_json(p.root / MANIFEST, data)


def resume_command(args: list[str], root: Path) -> str:
    """The command that resumes the study: the same arguments, into the same folder."""
    from attnlab.runs.resume import _path_value  # a folder as the resume commands quote it

    kept = [a for a in args if override_key(a) != "hydra.sweep.dir"]
    where = f"hydra.sweep.dir={_path_value(root.resolve())}"
    return shlex.join(["attnlab", "sweep", "tuned", *kept, where])
