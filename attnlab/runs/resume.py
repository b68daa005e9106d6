"""A run directory asked again: what a resume may change, and the command that resumes it.

A resumed run continues what its checkpoint computed, so a command whose config differs from
the checkpoint's in a key that changes what a run computes is refused (``check_same_config``)
before anything is written. Only ``RESUMABLE`` may change: the keys that cannot change a
result and ``train.steps`` (a larger value trains on), declared in ``attnlab.config.keys``.

``resume_command`` is the exact command that resumes an interrupted run, or the sweep it is a
job of, read from what Hydra recorded (``.hydra/hydra.yaml``; a sweep's ``multirun.yaml``)
and quoted for the shell; the interrupt message, the sweep summary and the report print it.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from attnlab.errors import UserError

UNSET = "<unset>"  # a key one config lacks
SWEEP_MARKER = "multirun.yaml"  # Hydra's record of a sweep, in its sweep directory


def check_same_config(saved: dict[str, Any], now: dict[str, Any], where: Path) -> None:
    """Refuse ``now`` (this command's config, plain values) when it differs from ``saved``
    (the checkpoint's) in any key outside ``RESUMABLE``: one line naming the key, both values."""
    from attnlab.config.keys import ADDED_DEFAULTS, RESUMABLE, flatten  # kept light (the CLI)

    old = {**ADDED_DEFAULTS, **flatten(saved)}
    new = {**ADDED_DEFAULTS, **flatten(now)}
    keys = sorted([*new, *(k for k in old if k not in new)], key=lambda k: k != "model.name")
    for key in keys:
        was, asked = old.get(key, UNSET), new.get(key, UNSET)
        if key in RESUMABLE or was == asked:
            continue
        section = f"{key.split('.')[0]} " if "." in key else ""
        raise UserError(
            f"{where}: this run directory holds a checkpoint trained with another {section}"
            f"config ({key}={was}; this command: {key}={asked}); use a new run directory (or "
            f"the same config to resume)"
        )


def hydra_value(value: object) -> str:
    """A path or name as a quoted Hydra override value, so that spaces, commas, quotes,
    brackets and non-ASCII characters reach the task unchanged (paths are data)."""
    text = str(value)
    # Hydra reads a backslash as an escape only before a quote or at the end of the string.
    body = re.sub(r"(\\*)('|$)", lambda m: m.group(1) * 2 + ("\\'" if m.group(2) else ""), text)
    return f"'{body}'"


def _path_value(path: Path) -> str:
    """A directory as an override value: as it is when Hydra reads it so, else quoted (in
    double quotes when it has none, so that the shell's single quotes wrap it whole)."""
    text = str(path)
    if re.fullmatch(r"[\w./:~@%+-]+", text, re.ASCII):
        return text
    return f'"{text}"' if '"' not in text and not text.endswith("\\") else hydra_value(text)


def _recorded(path: Path) -> dict[str, Any] | None:
    """The ``hydra`` node of a hydra.yaml or multirun.yaml as plain values (unresolved)."""
    from omegaconf import OmegaConf

    try:
        node = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    except Exception:  # missing or unreadable: no command to offer
        return None
    hydra = node.get("hydra") if isinstance(node, dict) else None
    return hydra if isinstance(hydra, dict) else None


def resume_command(run_dir: Path | str) -> str | None:
    """The shell command that resumes the run in ``run_dir``: its own command with
    ``hydra.run.dir=``, or for a sweep job its sweep's command with ``hydra.sweep.dir=``.
    None when Hydra's record of how it was started is missing (a run made outside Hydra)."""
    run = Path(run_dir).resolve()
    hydra = _recorded(run / ".hydra" / "hydra.yaml")
    if hydra is None:
        return None
    if str(hydra.get("mode")) == "MULTIRUN":
        sweep = next((p for p in run.parents if (p / SWEEP_MARKER).is_file()), None)
        return sweep_command(sweep) if sweep is not None else None
    return _command(hydra, ["attnlab", "train"], f"hydra.run.dir={_path_value(run)}")


def sweep_command(sweep_dir: Path | str) -> str | None:
    """The shell command that resumes the sweep in ``sweep_dir`` (or starts again the jobs
    it has not started): its command with ``hydra.sweep.dir=``, from its ``multirun.yaml``.
    None when that record is missing."""
    sweep = Path(sweep_dir).resolve()
    hydra = _recorded(sweep / SWEEP_MARKER)
    if hydra is None:
        return None
    sweeps = (hydra.get("job") or {}).get("config_name") == "sweep"
    prog = ["attnlab", "sweep", "lengths"] if sweeps else ["attnlab", "train", "-m"]
    return _command(hydra, prog, f"hydra.sweep.dir={_path_value(sweep)}")


def _command(hydra: dict[str, Any], prog: list[str], where: str) -> str:
    """``prog``, the recorded task and hydra overrides (but where it ran), then ``where``."""
    overrides = hydra.get("overrides") or {}
    dropped = ("hydra.mode=", "hydra.run.dir=", "hydra.sweep.dir=")
    own = [str(o) for o in overrides.get("hydra") or [] if not str(o).startswith(dropped)]
    return shlex.join([*prog, *map(str, overrides.get("task") or []), *own, where])


def continue_command(run_dir: Path | str, override: str) -> str | None:
    """``resume_command`` with ``override`` (``key=value``) in place of any value of that key
    it held: the command that trains a finished run on (``train.steps=N``)."""
    command = resume_command(run_dir)
    if command is None:
        return None
    from attnlab.config.overrides import override_key

    key = override_key(override)
    kept = [a for a in shlex.split(command) if "=" not in a or override_key(a) != key]
    return shlex.join([*kept, override])
