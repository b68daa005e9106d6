"""Host-side code a reader's loss calls, and the compiled loss (``train.compile``).

A loss takes its batch's labels as strings (``Reader.loss(images, widths, labels)``) and turns
them into tensors in Python. Traced by ``torch.compile``, every label string became a guard:
each batch with other labels compiled the loss again, until torch gave up and ran it
uncompiled. ``@host_side`` marks such a function (a plugin reader's too); ``compile_loss``
first rebinds every marked function, in its module, to ``torch.compiler.disable`` of itself,
so that a compiled loss calls it outside its graphs and never guards on what it reads, then
compiles the loss. The rebinding waits until a loss is compiled: ``torch.compiler.disable``
imports ``torch._dynamo`` (about 2 s), which a process that compiles nothing does not pay.
A marked function must be called through its module's name for it (``tokens.encode(...)``,
or a module-level name in its own module), never through a reference kept before.

Importing it needs no torch (``attnlab.models.tokens`` marks its ``encode``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)

_MARKED: list[tuple[str, str]] = []  # (module, name) of every host-side function
_rebound: set[tuple[str, str]] = set()


def host_side(fn: F) -> F:
    """Marks a module-level function as host-side (above); returns it unchanged."""
    _MARKED.append((fn.__module__, fn.__name__))
    return fn


def compile_loss(loss: Callable, **options) -> Callable:
    """``loss`` compiled (dynamic shapes: the strips' widths change every batch), with every
    host-side function marked so far kept out of its graphs; ``options`` go to
    ``torch.compile`` (a test traces with ``backend="eager"``)."""
    import torch

    for module, name in _MARKED:
        if (module, name) not in _rebound:
            owner = sys.modules[module]
            setattr(owner, name, torch.compiler.disable(getattr(owner, name)))
            _rebound.add((module, name))
    return torch.compile(loss, **{"dynamic": True, **options})
