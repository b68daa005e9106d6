"""The schema of ``hydra/launcher=parallel``: joblib's, and ``jobs_per_gpu``.

No ``from __future__ import annotations`` here: Hydra's plugin scan imports this module
without registering it, and a dataclass with string annotations then fails to build.
"""

from dataclasses import dataclass
from typing import Optional

from hydra.core.config_store import ConfigStore
from hydra_plugins.hydra_joblib_launcher.config import JobLibLauncherConf


@dataclass
class ParallelLauncherConf(JobLibLauncherConf):
    _target_: str = "hydra_plugins.attnlab_parallel.launcher.ParallelLauncher"
    jobs_per_gpu: Optional[int] = None  # noqa: UP045 (null: attnlab.runtime.jobs_per_gpu)


ConfigStore.instance().store(
    group="hydra/launcher", name="attnlab_parallel", node=ParallelLauncherConf, provider="attnlab"
)
