"""Which config keys change what a run computes, declared once.

`NEUTRAL_KEYS` cannot change a number a run computes or reports (where it runs, how it
reports progress): the seeds of one variant may differ in them (attnlab.report.variants),
and a run asked again into its own directory may change them (`RESUMABLE`). Every
other key counts, including keys one side lacks (an older attnlab): when in doubt, a key
counts.
"""

from __future__ import annotations

import json
from typing import Any

NEUTRAL_KEYS = (
    "train.device",  # where it ran (auto | cpu | cuda:N)
    "train.threads",  # CPU threads (1- and 2-thread CPU runs differ slightly: float sums in
    # another order; the report's run table shows each run's)
    "train.thread_policy",  # how many of those threads while other work runs (same rule)
    "train.progress",  # progress display
    "train.log_every",  # logging cadence
    "train.checkpoint_every",  # checkpoint cadence (a resume continues the same run)
    "train.examples_shown",  # lines printed at each validation
    "train.maps_logged",  # TensorBoard images
    "train.objective",  # what a sweeper is told; its measure (which chooses best.pt) counts:
    # report.variants.identity and training.state.resumable check it
    "eval.batch_size",  # strips per forward pass (readings are padding-independent: tested)
    "eval.maps_k",  # how many maps are drawn
    "eval.map_lengths",
    "eval.head_maps",
    "eval.failures_shown",  # lines printed
    "eval.explore_n",  # how many strips the report's explorer keeps
)

# Keys added after runs were made, and the value a config without them means: a run that
# lacks one is read as having this value (a variant of its own only when it differs), so
# older runs stay seeds of today's default variant and still resume.
ADDED_DEFAULTS = {
    "train.freeze": "[]",  # nothing frozen (attnlab.training.freeze)
    "data.limit": "null",  # the whole training pool (attnlab.data.limit)
    "train.patience": "null",  # every run trains train.steps (attnlab.training.validation)
    "optim.schedule": '"cosine"',  # warm-up then cosine decay (attnlab.training.optim)
    "optim.ema": "0.0",  # the weights as trained, no average (attnlab.training.average)
    "train.minutes": "null",  # no budget in minutes (attnlab.training.budget)
    "data.unlabelled": "null",  # no self-training (attnlab.training.selftrain)
    "train.rounds": "3",  # self-training's rounds after round 0, at most
}

# What a run asked again into its own directory may change (attnlab.runs.resume): the keys
# above, and where the run ends: train.steps (a larger value trains on from the checkpoint),
# train.patience (a larger one, or null, trains on a run that stopped early),
# train.minutes (more minutes train on for what is left) and train.rounds (more rounds
# train on a self-training run that its cap stopped).
RESUMABLE = (*NEUTRAL_KEYS, "train.steps", "train.patience", "train.minutes", "train.rounds")


def flatten(node: Any, prefix: str = "") -> dict[str, str]:
    """Dotted keys -> canonical JSON text of each leaf (lists are leaves)."""
    if isinstance(node, dict):
        out: dict[str, str] = {}
        for key, value in node.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: json.dumps(node, sort_keys=True, default=str)}
