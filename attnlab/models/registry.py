"""Readers by name: each is a class, its config dataclass and a one-line description.

A reader module under ``attnlab/models/readers/`` registers itself with ``@register`` and
ships one ``conf/model/<name>.yaml`` whose defaults list names ``<name>_schema``; nothing
else in attnlab names it. Modules outside the package (a user's own reader) are loaded by
listing them in the ``ATTNLAB_READERS`` environment variable (comma-separated module names).

Checkpoints name their reader by this plain name, never by an import path, so loading one
never runs code a file asks for.
"""

from __future__ import annotations

import importlib
import importlib.resources
import os
import pkgutil
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from attnlab.config import ModelConfig
from attnlab.errors import UserError
from attnlab.models.base import Reader

PLUGINS_ENV = "ATTNLAB_READERS"


@dataclass(frozen=True)
class ReaderSpec:
    name: str
    reader: type[Reader]
    config: type[ModelConfig]
    description: str  # one line, shown by the report and `attnlab readers`


_READERS: dict[str, ReaderSpec] = {}
_discovered = False


def register(name: str, config: type[ModelConfig], description: str) -> Callable:
    """Class decorator: make ``cls`` the reader called ``name`` with config ``config``.

    Stores ``model/<name>_schema`` in Hydra's ConfigStore (and ``model/<name>`` itself when
    the package ships no YAML for it, e.g. a reader registered by a test or a plugin).
    """
    if not issubclass(config, ModelConfig):
        raise TypeError(f"reader {name!r}: its config must subclass attnlab.config.ModelConfig")

    def deco(cls: type[Reader]) -> type[Reader]:
        if name in _READERS and _READERS[name].reader is not cls:
            taken = _READERS[name].reader.__module__
            raise ValueError(f"reader name {name!r} is already taken (by {taken})")
        cls.name = name
        _READERS[name] = ReaderSpec(name, cls, config, description)
        node = config(name=name)
        cs = ConfigStore.instance()
        cs.store(group="model", name=f"{name}_schema", node=node)
        if not _packaged_yaml(name):
            cs.store(group="model", name=name, node=node)
        return cls

    return deco


def _packaged_yaml(name: str) -> bool:
    try:
        return importlib.resources.files("attnlab.conf").joinpath("model", f"{name}.yaml").is_file()
    except ModuleNotFoundError:
        return False


def discover() -> None:
    """Import every reader module of the package and those named in ATTNLAB_READERS."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    from attnlab.models import readers

    for mod in pkgutil.iter_modules(readers.__path__):
        importlib.import_module(f"{readers.__name__}.{mod.name}")
    for name in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        import_plugin(name)


_MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def import_plugin(name: str) -> None:
    """Import the reader module ``name`` of ATTNLAB_READERS; whatever goes wrong (not a
    module name, not found, a syntax error, an error or ``sys.exit`` while it runs, a
    reader name already taken) is one UserError line naming the module."""
    where = f"{PLUGINS_ENV}: reader module {name!r}"
    if not _MODULE_NAME.match(name):
        raise UserError(f"{where} is not a module name (dotted Python names, not a path)")
    try:
        importlib.import_module(name)
    except ImportError as err:
        raise UserError(f"{where}: cannot import it: {err}") from err
    except SyntaxError as err:
        raise UserError(f"{where}: syntax error in {err.filename}, line {err.lineno}") from err
    except SystemExit as err:
        raise UserError(f"{where} called sys.exit({err.code!r}) while being imported") from err
    except Exception as err:
        first = (str(err).strip().splitlines() or [""])[0]
        raise UserError(
            f"{where} failed while being imported: {type(err).__name__}: {first}"
        ) from err


LAB_READERS = ("fixed", "attention")  # the lab's comparison, in this order
BASELINE = "attention"  # the reader the report compares every other reader with by default


def names() -> list[str]:
    """Registered readers: the lab's two first, then the others by name."""
    discover()
    lab = [n for n in LAB_READERS if n in _READERS]
    return lab + sorted(n for n in _READERS if n not in lab)


def get(name: str) -> ReaderSpec:
    discover()
    if name not in _READERS:
        raise UserError(
            f"unknown reader {name!r}; registered: {', '.join(names())} (a reader outside "
            f"attnlab is loaded by naming its module in {PLUGINS_ENV})"
        )
    return _READERS[name]


def check_names(names: list[str] | tuple[str, ...], key: str | None = None) -> list[str]:
    """Reader names checked, in order: an unknown one is ``get``'s one line, prefixed by
    the ``key`` that named it (``cost.readers``, ``readers``) when given."""
    for name in names:
        try:
            get(str(name))
        except UserError as err:
            raise UserError(f"{key}: {err}" if key else str(err)) from None
    return [str(n) for n in names]


def renamed(name: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """A model section ``values`` of reader ``name`` (an older run's ``.hydra/config.yaml``
    or checkpoint) with each key its config renamed since (``RENAMED``: old -> new) under
    its new name; a section holding both names is refused in one line."""
    out = dict(values)
    for old, new in getattr(get(name).config, "RENAMED", {}).items():
        if old not in out:
            continue
        if new in out:
            raise UserError(
                f"model.{old} and model.{new}: the {name} reader's model.{old} is called "
                f"model.{new} now; give it once"
            )
        out[new] = out.pop(old)
    return out


def new_name(config: str, key: str) -> str | None:
    """What the reader config class named ``config`` (as OmegaConf names it in an error) calls
    its former key ``key`` now; None when it renamed no such key."""
    for spec in map(get, names()):
        if spec.config.__name__ == config:
            return getattr(spec.config, "RENAMED", {}).get(key)
    return None


def config_node(name: str, values: Mapping[str, Any] | None = None):
    """The typed config of reader ``name`` (an OmegaConf node), with ``values`` merged in
    (keys renamed since read under their new names: ``renamed``)."""
    node = OmegaConf.structured(get(name).config(name=name))
    if not values:
        return node
    if isinstance(values, DictConfig):
        values = OmegaConf.to_container(values)
    return OmegaConf.merge(node, renamed(name, values))


def build(cfg: ModelConfig, height: int, charset: str | None = None) -> Reader:
    """The reader ``cfg.name`` built from its config (checked against the reader's schema),
    for ``charset`` (``data.charset``; None: the ten digits): its vocabulary."""
    spec = get(str(cfg.name))
    typed = OmegaConf.get_type(cfg) if OmegaConf.is_config(cfg) else type(cfg)
    if typed is not None and typed is not spec.config and issubclass(typed, ModelConfig):
        raise UserError(
            f"model.name={cfg.name} does not match the chosen model config "
            f"({typed.__name__}); choose the reader with model={cfg.name}, not model.name"
        )
    from attnlab.models import tokens

    with tokens.building(charset or tokens.DIGITS):
        return spec.reader(cfg, height)


# A model over this many parameters is refused before it is built (4 GB of float32
# weights; the lab's readers have well under a million, preset=gpu a few million).
MAX_PARAMS = 1_000_000_000


# torch.nn.init's initialisers and the in-place fills they use: on a meta tensor they change
# nothing, and the first one would import torch._dynamo (~1 s of every evaluation's start).
_INITIALISERS = frozenset(
    {
        "normal_",
        "uniform_",
        "trunc_normal_",
        "constant_",
        "ones_",
        "zeros_",
        "eye_",
        "dirac_",
        "xavier_uniform_",
        "xavier_normal_",
        "kaiming_uniform_",
        "kaiming_normal_",
        "orthogonal_",
        "sparse_",
        "zero_",
        "fill_",
        "copy_",
        "bernoulli_",
        "exponential_",
        "geometric_",
        "log_normal_",
        "cauchy_",
        "random_",
    }
)


def build_shapes(cfg: ModelConfig, height: int, charset: str | None = None) -> Reader:
    """The reader ``cfg.name`` as shapes only: built on PyTorch's meta device (no memory),
    its initialisers skipped (they only fill values a meta tensor does not have). A torch
    function mode, so only this thread's build is affected."""
    import torch
    from torch.overrides import TorchFunctionMode

    class SkipInit(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            first = args[0] if args else (kwargs or {}).get("tensor")  # nn.init: by keyword
            if (
                getattr(func, "__name__", None) in _INITIALISERS
                and isinstance(first, torch.Tensor)
                and first.is_meta
            ):
                return first
            return func(*args, **(kwargs or {}))

    with torch.device("meta"), SkipInit():
        return build(cfg, height, charset)


def check_size(cfg: ModelConfig, height: int, charset: str | None = None) -> int:
    """The reader's parameter count, measured on PyTorch's meta device (shapes without
    memory); a reader over MAX_PARAMS is refused in one line, before anything is allocated."""
    try:
        reader = build_shapes(cfg, int(height), charset)
    except UserError:
        raise
    except Exception as err:  # a shape no reader can take (crafted config)
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise UserError(f"model config cannot be built: {first[:200]}") from err
    params = sum(p.numel() for p in reader.parameters())
    if params > MAX_PARAMS:
        raise UserError(
            f"model: {params:,} parameters is too large (over {MAX_PARAMS:,}); check "
            f"model.hidden and the other sizes"
        )
    return params
