"""``attnlab train init_from=RUN_OR_CHECKPOINT``: start from a trained reader's weights.

Every tensor of the new reader that the source checkpoint holds with the same name and
shape is copied; the others keep their fresh initialisation and are listed in one line
(for another charset: the layers sized by the vocabulary, i.e. the output layer, the token
embedding and the auxiliary CTC head). The encoder must fit as it is: a config that differs
from the source run's in the encoder's shape is refused in one line naming the key. The
checkpoint is read with ``weights_only=True`` (``attnlab.runs.checkpoint.load``).
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from attnlab.errors import UserError
from attnlab.runs import checkpoint

log = logging.getLogger("attnlab.train")

# The keys that shape the column encoder every reader shares (config.ModelConfig).
ENCODER_KEYS = ("stem_channels", "stride", "column_convs", "column_mlp", "column_norm")
ENCODER_KEYS += ("hidden", "layers")


def init_from(model: torch.nn.Module, cfg: Any, source: str) -> dict[str, Any]:
    """Load what fits of ``source`` (a run directory: its best.pt, or a checkpoint file)
    into ``model``; returns the record the run keeps (path, step, what was re-initialised)."""
    path = checkpoint.resolve(source, "best")
    ckpt = checkpoint.load(path)
    before = ckpt.run_config()
    what = f"init_from={source}"
    if int(before.data.height) != int(cfg.data.height):
        raise UserError(
            f"{what}: data.height={cfg.data.height} but the source run's is "
            f"{before.data.height}: the encoder's shape must be the source's"
        )
    for key in ENCODER_KEYS:
        old, new = before.model.get(key), cfg.model.get(key)
        old = list(old) if hasattr(old, "__len__") else old
        new = list(new) if hasattr(new, "__len__") else new
        if old != new:
            raise UserError(
                f"{what}: model.{key}={new} but the source run's is {old}: the encoder's "
                f"shape must be the source's (leave model.{key} as it was)"
            )
    saved: dict[str, torch.Tensor] = ckpt.model
    own = model.state_dict()
    for key, value in own.items():  # a reader whose encoder is built another way
        if key.startswith("encoder.") and (key not in saved or saved[key].shape != value.shape):
            raise UserError(f"{what}: the source's encoder has no tensor {key} of this shape")
    fits = {k: v for k, v in saved.items() if k in own and v.shape == own[k].shape}
    fresh = [k for k in own if k not in fits]
    model.load_state_dict({**own, **fits})
    layers = sorted({k.rsplit(".", 1)[0] for k in fresh})
    log.info(
        "initialised from %s (a %s reader at step %s): %d of %d tensors; re-initialised: %s",
        path, ckpt.reader, ckpt.step, len(fits), len(own),
        ", ".join(layers) if layers else "none",
    )  # fmt: skip
    return {
        "path": str(path.resolve()),
        "reader": ckpt.reader,
        "step": int(ckpt.step),
        "charset": str(before.data.charset),
        "reinitialised": fresh,
    }
