"""``attnlab readers``: the registered readers, each with its own config keys, then the
encoders, each with its own."""

from __future__ import annotations

from collections.abc import Callable

from attnlab.config import ModelConfig
from attnlab.models import config_keys, encoders, registry


def list_readers(name: str | None, say: Callable[[str], None]) -> None:
    """A line on each reader (``name``: that one only), then its own config keys
    (model.KEY=default, allowed values, what it does), then the keys every reader shares and
    each encoder's own keys under that encoder.
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
    shared = config_keys.keys_of(ModelConfig)
    say("every reader (the keys every encoder reads; encoder=NAME chooses model.backbone)")
    for line in config_keys.table([k for k in shared if not _own_key(k.name)]):
        say(line)
    for name in encoders.names():
        spec = encoders.get(name)
        say(f"encoder={name}  {spec.description}")
        own = [k for k in shared if k.name.split(".", 1)[1] in spec.keys]
        for line in config_keys.table(own):
            say(line)


def _own_key(key: str) -> bool:
    """A model key some encoder reads that not every encoder reads."""
    field = key.split(".", 1)[1]
    return any(field in encoders.get(n).keys for n in encoders.names())
