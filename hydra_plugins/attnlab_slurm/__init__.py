"""attnlab's Hydra launcher for SLURM (``hydra/launcher=slurm``): see ``launcher.py``.

Hydra finds launchers only under the ``hydra_plugins`` namespace package, which is shared
with hydra-submitit-launcher and other plugins: ``hydra_plugins`` itself has no
``__init__.py`` and must never get one.
"""
