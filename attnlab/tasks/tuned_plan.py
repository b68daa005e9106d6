"""The command line of ``attnlab sweep tuned`` taken apart (``plan``): the readers, the
search space each of them has, the seeds and the budget of every trial, and, in one line
each, what cannot be studied fairly (an axis no reader has, a reader with none of the axes,
re-run seeds that are a trial's, a budget in minutes given twice or swept). The stages it
plans: attnlab.tasks.tuned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from attnlab.config.overrides import override_key
from attnlab.config.tune import TuneConfig
from attnlab.errors import UserError, one_line
from attnlab.tasks.tuned_record import PROG

DEFAULT_OBJECTIVE = "val_exact"
_ABSENT = object()


@dataclass
class Plan:
    """The command line taken apart: what each stage is given."""

    readers: list[str]
    tune: Any  # the checked ``tune`` section
    root: Path
    objective: str
    axes: list[str]  # the search space as typed ('optim.lr=interval(0.0005,0.01)')
    plain: list[str]  # every other override: both the trials and the re-runs get them
    axes_of: dict[str, list[str]] = field(default_factory=dict)  # reader -> its axes
    dropped: dict[str, list[str]] = field(default_factory=dict)  # reader -> keys it lacks
    trial_seeds: list[int] = field(default_factory=list)
    trial_steps: int = 0  # train.steps of each trial (tune.steps, else the config's)
    minutes: float | None = None  # train.minutes of each trial and re-run (tune.minutes)

    @property
    def rerun_seeds(self) -> list[int]:
        return list(range(self.tune.first_seed, self.tune.first_seed + self.tune.seeds))


def _parse(arg: str) -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_override(arg)
    except Exception as err:  # Hydra's own message, in one line
        raise UserError(f"{arg}: {str(err).splitlines()[0]}") from err


def _compose(overrides: list[str], config_name: str = "train", hydra: bool = False) -> Any:
    """``tasks.compose``, a config error as one UserError line (what and where)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from attnlab.tasks.compose import compose

    try:
        return compose(overrides, config_name, hydra)
    except (HydraException, OmegaConfBaseException) as err:
        cause = err.__cause__ or err
        raise UserError(
            f"config: {one_line(err)}: {one_line(cause)}"
            if cause is not err
            else f"config: {one_line(err)}"
        ) from err


def plan(args: list[str]) -> Plan:
    """Read the command line; refuse in one line what cannot be studied fairly."""
    args = [a for a in args if a not in ("-m", "--multirun")]  # every stage is a multirun
    tune_args = [a for a in args if override_key(a).startswith("tune.")]
    rest = [a for a in args if a not in tune_args]
    for a in rest:
        if override_key(a) in ("hydra/sweeper", "hydra/sweeper/sampler") or override_key(
            a
        ).startswith("hydra.sweeper."):
            raise UserError(f"{a}: {PROG} sets the sweeper itself (tune.sampler, tune.trials)")
    tune = _compose(tune_args, config_name="tune").tune
    TuneConfig.check(tune)
    _check_minutes(tune, rest)
    model = next((a for a in rest if override_key(a) == "model"), None)
    root_arg = next((a for a in rest if override_key(a) == "hydra.sweep.dir"), None)
    objective = next((a for a in rest if override_key(a) == "train.objective"), None)
    named = {model, root_arg, objective}
    axes = [a for a in rest if a not in named and _parse(a).is_sweep_override()]
    plain = [a for a in rest if a not in named and a not in axes]
    readers = _readers(model)
    root = Path(str(_parse(root_arg).value())) if root_arg else _default_root()
    chosen = str(_parse(objective).value()) if objective else DEFAULT_OBJECTIVE
    p = Plan(readers, tune, root, chosen, axes, plain)
    _fit_axes(p)
    _check_seeds(p)
    return p


def _check_minutes(tune: Any, rest: list[str]) -> None:
    """``tune.minutes`` is the budget of every trial and every re-run: a ``train.minutes``
    beside it would say another; and a budget in minutes is one number, not an axis."""
    named = next((a for a in rest if override_key(a) == "train.minutes"), None)
    if named is None:
        return
    if _parse(named).is_sweep_override():
        raise UserError(
            f"{named}: a budget in minutes is the same for every trial (tune.minutes=M), "
            "not a search axis"
        )
    if tune.minutes is not None:
        raise UserError(
            f"tune.minutes={tune.minutes:g} and {named}: tune.minutes is the budget of every "
            "trial and re-run; give one of them"
        )


def _readers(model: str | None) -> list[str]:
    """The readers to study: ``model=a,b`` or, without it, ``attnlab sweep lengths``' own."""
    from attnlab.models import registry

    if model is None:
        value = _compose([], config_name="sweep", hydra=True).hydra.sweeper.params.model
        names = [n.strip() for n in str(value).split(",")]
    else:
        o = _parse(model)
        names = [str(v) for v in o.sweep_iterator()] if o.is_sweep_override() else [o.value()]
    registry.check_names(names)  # an unknown reader: its one line
    if len(set(names)) < 2:
        raise UserError(f"model={','.join(names)}: {PROG} compares readers; name two or more")
    return list(dict.fromkeys(names))


def _default_root() -> Path:
    now = datetime.now()
    return Path("multirun") / "tuned" / now.strftime("%Y-%m-%d") / now.strftime("%H-%M-%S")


def _fit_axes(p: Plan) -> None:
    """Each reader's axes: those whose key its composed config has. A key one reader lacks is
    dropped for it (said by ``run``); a key no reader has is refused."""
    if not p.axes:
        raise UserError(f"{PROG}: no search axis (e.g. 'optim.lr=interval(0.0005,0.01)')")
    for reader in p.readers:
        cfg = _compose(
            [f"model={reader}", *(a for a in p.plain if not override_key(a).startswith("hydra"))]
        )
        keys = [override_key(a) for a in p.axes]
        has = [OmegaConf.select(cfg, k, default=_ABSENT) is not _ABSENT for k in keys]
        p.axes_of[reader] = [a for a, ok in zip(p.axes, has, strict=True) if ok]
        p.dropped[reader] = [k for k, ok in zip(keys, has, strict=True) if not ok]
        if not p.trial_seeds:
            p.trial_seeds = [int(cfg.seed)]
            p.trial_steps = int(p.tune.steps or cfg.train.steps)
            own = OmegaConf.select(cfg, "train.minutes", default=None)  # a plain train.minutes
            p.minutes = p.tune.minutes if p.tune.minutes is not None else own
    for axis in p.axes:
        if all(override_key(axis) in p.dropped[r] for r in p.readers):
            raise UserError(
                f"{axis}: no reader here has {override_key(axis)} ({', '.join(p.readers)}); "
                "attnlab readers lists each reader's keys"
            )
    for reader in p.readers:
        if not p.axes_of[reader]:
            raise UserError(
                f"model={reader} has none of the search axes ({', '.join(p.dropped[reader])}): "
                f"its {p.tune.trials} trials would be one configuration repeated, not an equal "
                "budget; add an axis it has (e.g. 'optim.lr=interval(0.0005,0.01)')"
            )


def _check_seeds(p: Plan) -> None:
    """The trials' seeds (``seed``, or the values of a ``seed`` axis) and the re-runs' must
    differ: a re-run with its trial's seed is that trial again, not a new measurement."""
    seed_axis = next((a for a in p.axes if override_key(a) == "seed"), None)
    if seed_axis is not None:
        o = _parse(seed_axis)
        try:
            p.trial_seeds = sorted({int(v) for v in o.sweep_iterator()})
        except Exception as err:
            raise UserError(f"{seed_axis}: search seeds with choice() or range()") from err
    clash = sorted(set(p.trial_seeds) & set(p.rerun_seeds))
    if clash:
        raise UserError(
            f"tune.first_seed={p.tune.first_seed} tune.seeds={p.tune.seeds}: the re-runs' seeds "
            f"{p.rerun_seeds} include the trials' seed(s) {clash}; choose a tune.first_seed "
            f"above {max(p.trial_seeds)}"
        )
