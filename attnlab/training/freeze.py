"""``train.freeze=[PART,...]``: parts of the reader kept as they are while the rest trains.

Each reader declares its parts (``Reader.PARTS``: part name -> the attributes that make it,
e.g. ``encoder``, ``decoder``, ``output``). A frozen part's parameters get
``requires_grad=False`` and are not handed to the optimiser, so they get no gradient, no
optimiser state and no weight decay: their weights stay bit-identical through training
(the parts and their parameters: attnlab.models.parts).
A frozen part is frozen from step 0 (after ``init_from`` has loaded it, usually the point:
a reader trained on synthetic strips keeps its encoder while its decoder learns new strips).
A name the reader does not declare is refused in one line listing its parts, before a
run writes anything (``check_freeze``, called by the trainer's config check).
"""

from __future__ import annotations

import logging
from typing import Any

from torch import nn

from attnlab.errors import UserError
from attnlab.models.parts import part_parameters, reader_parts

log = logging.getLogger("attnlab.train")


def check_freeze(names: Any, reader: type | nn.Module, reader_name: str) -> list[str]:
    """``train.freeze`` checked against the reader's parts; the names, in order, once each.
    Unknown names, or every part named (nothing left to train), are one UserError line."""
    wanted = [str(n) for n in (names or [])]
    parts = reader_parts(reader)
    listed = ", ".join(parts) or "none"
    unknown = [n for n in wanted if n not in parts]
    if unknown:
        raise UserError(
            f"train.freeze={wanted}: the {reader_name} reader has no part "
            f"{', '.join(map(repr, unknown))}; its parts: {listed}"
        )
    kept = list(dict.fromkeys(wanted))
    if parts and set(kept) >= set(parts):
        raise UserError(
            f"train.freeze={wanted}: names every part of the {reader_name} reader ({listed}); "
            "nothing would train (leave at least one part out)"
        )
    return kept


def freeze(model: nn.Module, names: list[str]) -> list[str]:
    """Freeze the named parts of ``model`` (checked names); the frozen parameters' names."""
    frozen: list[str] = []
    for part in names:
        for key, param in part_parameters(model, part).items():
            param.requires_grad_(False)
            frozen.append(key)
    if names:
        count = sum(p.numel() for p in model.parameters() if not p.requires_grad)
        total = sum(p.numel() for p in model.parameters())
        log.info(
            "frozen: %s (%d of %d parameters; %d tensors), not given to the optimiser",
            ", ".join(names),
            count,
            total,
            len(frozen),
        )
    return frozen


def trainable(model: nn.Module) -> list[nn.Parameter]:
    """The parameters the optimiser is given: all but the frozen ones."""
    return [p for p in model.parameters() if p.requires_grad]


def warn_unloaded(frozen: list[str], started_from: dict[str, Any] | None) -> None:
    """A frozen tensor that ``init_from`` could not load stays at its random initialisation
    for the whole run: said in one warning (it is allowed: a user may want exactly that)."""
    if not started_from or not frozen:
        return
    fresh = sorted(set(frozen) & set(started_from.get("reinitialised") or []))
    if fresh:
        log.warning(
            "train.freeze keeps %d tensor(s) that init_from could not load at their random "
            "initialisation for the whole run: %s",
            len(fresh),
            ", ".join(fresh),
        )


def warn_random(names: list[str], init_from: Any) -> None:
    """``train.freeze`` without ``init_from``: the frozen parts keep their random
    initialisation for the whole run. Allowed (a random-features baseline, as the README's
    data-needs sweep crosses ``init_from=null,RUN`` with ``train.freeze=[],[encoder]``), but
    said in one warning line, since it is rarely what a fine-tuning meant."""
    if names and not init_from:
        log.warning(
            "train.freeze=[%s] with init_from=null: the frozen part(s) keep their random "
            "initialisation for the whole run; set init_from=RUN to freeze trained weights",
            ",".join(names),
        )
