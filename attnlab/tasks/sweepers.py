"""What a Hydra sweeper that optimises (Optuna, Nevergrad, Ax) is given before its first trial.

``conf/train.yaml`` registers ``SweeperObjective`` as a Hydra callback, so ``attnlab train -m``
and ``attnlab sweep lengths`` both pass through it once, in the sweep's own process, before
the sweeper is made. Such a sweeper wants one number per trial, so:

- ``train.objective`` must be set (else every trial would fail on a dict of metrics);
- the sweeper must seek the objective's direction (``attnlab.config.OBJECTIVES``). A direction
  the command line does not name is set from the objective; one it names that disagrees is
  refused (an Optuna study minimising ``val_exact`` names its worst trial as best);
- a failing trial must not end the study: unless the command line names it, the sweeper's
  ``max_failure_rate`` is 1.0, so the finished trials' results are still written.

What this sets is added to ``hydra.overrides.hydra`` too, as if typed: every trial's
``.hydra/hydra.yaml`` records the values the sweeper used. A refusal is one line on stderr
and exit status 2, before any trial runs (Hydra passes over a callback's exceptions, so it
exits itself, as ``attnlab.errors.reports_user_errors`` does). A study that ends without a
result (every trial failed) is one line too: ``raised_in_sweeper`` tells the CLI so.
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict, read_write

from attnlab.config import OBJECTIVES, TrainConfig, check_objective_of
from attnlab.errors import UserError, exit_with

log = logging.getLogger("attnlab.sweep")


@dataclass(frozen=True)
class Direction:
    """A key of a sweeper's config (under ``hydra.sweeper``) that says which way it goes, and
    its value for each direction."""

    key: str
    maximize: Any
    minimize: Any


@dataclass(frozen=True)
class Optimiser:
    """A sweeper that optimises: its name, the keys of its direction, the key of the share of
    failed trials it stops at (None: it has none)."""

    name: str
    directions: tuple[Direction, ...]
    failure_rate: str | None


# By the module of the sweeper's _target_ (the plugins' own config.py files, Hydra 1.3).
OPTIMISERS = {
    "hydra_optuna_sweeper": Optimiser(
        "optuna", (Direction("direction", "maximize", "minimize"),), "max_failure_rate"
    ),
    "hydra_nevergrad_sweeper": Optimiser(
        "nevergrad", (Direction("optim.maximize", True, False),), "optim.max_failure_rate"
    ),
    "hydra_ax_sweeper": Optimiser(
        "ax",
        (
            Direction("ax_config.experiment.minimize", False, True),
            Direction("ax_config.early_stop.minimize", False, True),
        ),
        None,
    ),
}


def optimiser_of(sweeper: Any) -> Optimiser | None:
    """The optimising sweeper ``hydra.sweeper`` makes, or None (the basic sweeper, a grid)."""
    target = str(OmegaConf.select(sweeper, "_target_", default="") or "")
    parts = target.split(".")
    return next((o for name, o in OPTIMISERS.items() if name in parts), None)


def named_keys(overrides: list[str]) -> set[str]:
    """The keys a list of overrides names (``+key=``, ``++key=``, ``~key`` included)."""
    from attnlab.config.overrides import override_key

    return {override_key(o) for o in overrides}


def settings(cfg: DictConfig, config_name: str | None = None) -> dict[str, Any]:
    """The ``hydra.sweeper`` keys to set for this sweep, or ``{}``; a UserError when the
    sweep cannot give its sweeper what it wants."""
    opt = optimiser_of(cfg.hydra.sweeper)
    if opt is None:
        return {}
    objective = cfg.train.get("objective")
    if objective is None:
        raise UserError(
            f"hydra/sweeper={opt.name} needs one number from each trial: set train.objective "
            f"to one of {', '.join(OBJECTIVES)} (README, 'Sweepers')"
        )
    TrainConfig.check(cfg.train)  # an unknown objective: the task's own line, once
    check_objective_of(config_name or "", objective)
    wanted = OBJECTIVES[objective][0]
    named = named_keys(list(cfg.hydra.overrides.hydra))
    out: dict[str, Any] = {}
    for d in opt.directions:
        value = _one(OmegaConf.select(cfg.hydra.sweeper, d.key), d.key, objective)
        want = d.maximize if wanted == "maximize" else d.minimize
        if value == want:
            continue
        if f"hydra.sweeper.{d.key}" in named:
            raise UserError(
                f"hydra.sweeper.{d.key}={_text(value)} disagrees with train.objective="
                f"{objective}, which is {wanted}d: the study would pick its worst trial; "
                f"use hydra.sweeper.{d.key}={_text(want)} or leave it out"
            )
        out[d.key] = want
    if opt.failure_rate is not None and f"hydra.sweeper.{opt.failure_rate}" not in named:
        out[opt.failure_rate] = 1.0
    return out


def _one(value: Any, key: str, objective: str) -> Any:
    """A direction's value as a plain str or bool; a list of them holds exactly one."""
    if isinstance(value, (list, tuple, ListConfig)):
        if len(value) != 1:
            raise UserError(
                f"hydra.sweeper.{key} names {len(value)} directions, but train.objective="
                f"{objective} is one number: give one direction"
            )
        value = value[0]
    value = getattr(value, "name", value)  # Optuna's Direction enum -> its name
    return value.lower() if isinstance(value, str) else value


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def apply(cfg: DictConfig, values: dict[str, Any]) -> None:
    """Set ``hydra.sweeper`` keys in the sweep's config and add them to its hydra overrides,
    from which Hydra composes each trial's config."""
    with read_write(cfg.hydra), open_dict(cfg.hydra):
        for key, value in values.items():
            OmegaConf.update(cfg.hydra.sweeper, key, value, merge=False)
            cfg.hydra.overrides.hydra.append(f"hydra.sweeper.{key}={_text(value)}")
            log.info("attnlab sets hydra.sweeper.%s=%s", key, _text(value))


def raised_in_sweeper(err: BaseException) -> bool:
    """Whether an exception comes from a Hydra sweeper plugin (hydra_plugins/hydra_*_sweeper)
    or the optimiser under it (Optuna's "No trials are completed yet" when every trial
    failed), rather than from a trial, whose own errors the sweeper records and logs."""
    frames = traceback.extract_tb(err.__traceback__)
    parts = Path(frames[-1].filename).parts if frames else ()
    plugin = any(p.startswith("hydra_") and p.endswith("_sweeper") for p in parts)
    return plugin or any(p in ("optuna", "nevergrad", "ax") for p in parts)


class SweeperObjective(Callback):
    """Checks and completes an optimising sweeper's config before its first trial."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            apply(config, settings(config, kwargs.get("config_name")))
        except UserError as err:
            exit_with(err)
