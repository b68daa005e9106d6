"""One clear line when a folder named ``attnlab`` hides the installed package.

Python imports a folder without ``__init__.py`` that it finds on ``sys.path`` (the current
folder or a script's comes first) as an empty namespace package, unless a regular package
of that name lies on ``sys.path`` too. setuptools' editable install (``pip install -e .``)
maps ``attnlab`` with an import hook that is asked only after that search, so a clone of
this repository named ``attnlab`` beside a script hides the package: ``import attnlab;
attnlab.load`` fails with "module 'attnlab' has no attribute 'load'", and no code of
attnlab can say why there (the namespace package runs none).

``make install`` puts the clone's root on ``sys.path`` as well (a ``.pth`` file), so the real
package wins wherever Python runs; with ``pip install -e .`` the package's modules still
import (the hook maps ``attnlab.<module>``), so the command line, which imports this module
first (``python -m attnlab.cli``), stops with one line naming the folder and exit status 2.
"""

from __future__ import annotations

import sys

import attnlab


def hiding_folder() -> str | None:
    """The folder imported as ``attnlab`` in place of the package; None when all is well."""
    if getattr(attnlab, "__file__", None) is not None:
        return None
    return next(iter(getattr(attnlab, "__path__", None) or []), "an unknown place")


def check() -> None:
    """Exit with one line (status 2) when a folder hides the package."""
    folder = hiding_folder()
    if folder is None:
        return
    sys.stderr.write(
        f"attnlab: the folder {folder} (named attnlab, no __init__.py: a clone of the "
        "repository?) hides the installed attnlab package; run from another folder, rename "
        "that one, or install with `make install` (it puts the clone on sys.path)\n"
    )
    raise SystemExit(2)


check()
