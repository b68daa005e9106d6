"""attnlab's local parallel launcher (``hydra/launcher=parallel``): see ``launcher.py``.

``hydra_plugins`` itself has no ``__init__.py`` and must never get one (a namespace package
shared with Hydra's own plugins).
"""
