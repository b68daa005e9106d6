"""attnlab's Python API (``attnlab.load``, ``attnlab.results``, ``attnlab.compare``), for
notebooks and scripts; ``attnlab/__init__.py`` imports it lazily, so ``import attnlab`` (and
the CLI's start-up) stays free of torch and pandas."""
