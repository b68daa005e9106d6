"""``python -m attnlab.cli``: the ``attnlab`` script."""

from attnlab.cli import run

if __name__ == "__main__":
    run()
