"""attnlab: the Lab 8 digit-reader comparison (fixed-context vs attention readers).

From Python: ``attnlab.load(run)`` (a trained reader), ``attnlab.results(paths...)`` (runs and
metrics as DataFrames), ``attnlab.compare(results, a, b)`` (paired differences). They are
imported on first use, so ``import attnlab`` loads neither torch nor pandas.
"""

from attnlab.errors import UserError

__version__ = "0.1.0"
__all__ = ["UserError", "__version__", "compare", "load", "results"]

_LAZY = {
    "load": "attnlab.api.reader",
    "results": "attnlab.api.results",
    "compare": "attnlab.api.results",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'attnlab' has no attribute {name!r}")
