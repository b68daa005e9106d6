"""Host-side code a reader's loss calls, and the compiled loss (``train.compile``).

A loss takes its batch's labels as strings (``Reader.loss(images, widths, labels)``) and turns
them into tensors in Python. Traced by ``torch.compile``, every label string became a guard:
each batch with other labels compiled the loss again, until torch gave up and ran it
uncompiled. ``@host_side`` marks such a function (a plugin reader's too); ``compile_loss``
first rebinds every marked function, in its module, to ``torch.compiler.disable`` of itself,
so that a compiled loss calls it outside its graphs and never guards on what it reads, then
compiles the loss. The rebinding waits until a loss is compiled: ``torch.compiler.disable``
imports ``torch._dynamo`` (about 2 s), which a process that compiles nothing does not pay.
A loss torch cannot compile (inductor fails on some readers: on the VGG encoder with dynamic
shapes, torch 2.13 raises an ``InductorError`` while compiling the first step) runs
uncompiled, with one warning line, rather than ending the run; ``CompiledLoss.failed`` says
why. A marked function must be called through its module's name for it (``tokens.encode(...)``,
or a module-level name in its own module), never through a reference kept before.

Importing it needs no torch (``attnlab.models.tokens`` marks its ``encode``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)
log = logging.getLogger("attnlab.train")

_MARKED: list[tuple[str, str]] = []  # (module, name) of every host-side function
_rebound: set[tuple[str, str]] = set()


def host_side(fn: F) -> F:
    """Marks a module-level function as host-side (above); returns it unchanged."""
    _MARKED.append((fn.__module__, fn.__name__))
    return fn


class CompiledLoss:
    """A compiled loss that falls back to the uncompiled one, for good, the first time torch
    fails to compile it (``failed``: the compiler's error, its first line; None while it
    compiles)."""

    def __init__(self, loss: Callable, compiled: Callable):
        self.loss, self.compiled, self.failed = loss, compiled, None

    def __call__(self, *args, **kwargs):
        if self.failed is not None:
            return self.loss(*args, **kwargs)
        from torch._dynamo.exc import BackendCompilerFailed

        try:
            return self.compiled(*args, **kwargs)
        except BackendCompilerFailed as err:  # a compiler's failure, never the loss's own
            why = getattr(err, "inner_exception", None) or err  # the compiler's own error
            self.failed = f"{type(why).__name__}: {(str(why).strip().splitlines() or [''])[0]}"
            log.warning(
                "train.compile: torch could not compile this reader's loss (%s); it trains "
                "uncompiled",
                self.failed,
            )
            return self.loss(*args, **kwargs)


def compile_loss(loss: Callable, **options) -> CompiledLoss:
    """``loss`` compiled (dynamic shapes: the strips' widths change every batch), with every
    host-side function marked so far kept out of its graphs; ``options`` go to
    ``torch.compile`` (a test traces with ``backend="eager"``)."""
    import torch

    for module, name in _MARKED:
        if (module, name) not in _rebound:
            owner = sys.modules[module]
            setattr(owner, name, torch.compiler.disable(getattr(owner, name)))
            _rebound.add((module, name))
    return CompiledLoss(loss, torch.compile(loss, **{"dynamic": True, **options}))
