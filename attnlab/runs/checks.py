"""Value checks beside ``attnlab.config`` (which holds the schemas and most checks): the
device, the seed, and the size of a model, so that a config from the command line and a
config read from a checkpoint pass the same checks before any tensor is built.
"""

from __future__ import annotations

import re
from typing import Any

from attnlab.config import _require, check_data, check_model

# What the README documents: auto (CUDA when present), cpu, cuda, cuda:N.
DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
SEED_LIMIT = 2**63  # torch.manual_seed takes a signed 64-bit integer
# A model over this many parameters is refused before it is built (4 GB of float32
# weights; the lab's readers have well under a million, preset=gpu a few million).
MAX_PARAMS = 1_000_000_000


def check_device(value: Any, key: str) -> None:
    _require(
        isinstance(value, str) and bool(DEVICE.match(value)),
        key, value, "must be auto, cpu, cuda or cuda:N",
    )  # fmt: skip


def check_run_task(which: Any, device: Any) -> None:
    """What every task on a trained run takes besides its own section (RunTaskConfig)."""
    _require(which in ("best", "last"), "checkpoint", which, "must be best or last")
    check_device(device, "device")


def check_seed(value: Any, key: str = "seed") -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < SEED_LIMIT
    _require(ok, key, value, f"must be an integer in [0, 2**63) (0 to {SEED_LIMIT - 1})")


def check_size(model: Any, height: int) -> int:
    """The model's parameter count, measured on PyTorch's meta device (shapes without
    memory); a model over MAX_PARAMS is refused in one line, before anything is allocated."""
    import torch

    from attnlab.errors import UserError
    from attnlab.models import registry

    try:
        with torch.device("meta"):
            reader = registry.build(model, int(height))
    except UserError:
        raise
    except Exception as err:  # a shape no reader can take (crafted config)
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise UserError(f"model config cannot be built: {first[:200]}") from err
    params = sum(p.numel() for p in reader.parameters())
    if params > MAX_PARAMS:
        raise UserError(
            f"model: {params:,} parameters is too large (over {MAX_PARAMS:,}); check "
            f"model.hidden and the other sizes"
        )
    return params


def check_trained_model(cfg: Any) -> None:
    """A run's config as a checkpoint holds it: its data and model values and its size,
    as ``check_experiment`` checks them on the command line."""
    check_data(cfg.data)
    check_model(cfg.model)
    check_size(cfg.model, cfg.data.height)
