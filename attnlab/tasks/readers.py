"""``attnlab readers``: the registered readers, each with its own config keys."""

from __future__ import annotations

from collections.abc import Callable

from attnlab.config import ModelConfig
from attnlab.models import config_keys, registry


def list_readers(name: str | None, say: Callable[[str], None]) -> None:
    """A line on each reader (``name``: that one only), then its own config keys
    (model.KEY=default, allowed values, what it does), then the keys every reader shares.
    An unknown ``name`` raises ``UserError`` before anything is said."""
    names = [registry.get(name).name] if name else registry.names()
    width = max(len(n) for n in names)
    for reader in names:
        say(f"{reader:<{width}}  {registry.get(reader).description}")
    # No blank lines: every line's first word is a reader, a key or a heading (scripts split)
    say("Each reader's own keys: model.KEY=default, allowed values, what it sets")
    say("(on the command line: model=NAME model.KEY=VALUE)")
    for reader in names:
        say(f"model={reader}")
        keys = config_keys.keys_of(registry.get(reader).config, below=ModelConfig)
        for line in config_keys.table(keys):
            say(line)
    say("every reader (the column encoder they share)")
    for line in config_keys.table(config_keys.keys_of(ModelConfig)):
        say(line)
