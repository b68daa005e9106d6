"""What a reader costs by count: parameters by part, and forward FLOPs per strip by part and
by module, counted by torch's own counter and set beside each reader's closed form.

The counter is ``torch.utils.flop_counter.FlopCounterMode`` (its formulas: matrix products,
convolutions and attention; 2 FLOPs a multiply-add; element-wise work not counted), with
every FLOP also given to the innermost module running when it was done (``ModuleFlops``),
so that a term of a closed form (``Reader.flop_terms``: attnlab.models.costs) is checked
against the module it names. The forward counted is teacher forcing of one strip of L
digits (L + 1 output steps, EOS included), as training does it, without the loss's
element-wise work.

On CUDA an ``nn.GRU`` runs as one cuDNN kernel (``aten._cudnn_rnn``), and on CPU
``F.scaled_dot_product_attention`` as one fused kernel, that torch's counter has no formula
for (they would count 0): ``register_formulas`` registers them, the counts the same work
decomposes into, so counts agree across devices (``FLOP_SOURCE`` says which).
``variant_cost`` is what the report sets beside a variant's scores: a config's parameters
by part and forward MFLOP per strip at a stated length (cached per config).
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, register_flop_formula

from attnlab.models import costs

# How the FLOPs of each module were found, for the CSV: torch's counter, or on CUDA the
# counter with our formula for cuDNN's RNN kernel (which it has none for).
FLOP_SOURCE = {
    "cpu": "FlopCounterMode + formula for CPU fused attention",
    "cuda": "FlopCounterMode + formula for cuDNN RNN",
}
RNN_GATES = {0: 1, 1: 1, 2: 4, 3: 3}  # cuDNN's modes: RNN_RELU, RNN_TANH, LSTM, GRU


def params_by_part(model: nn.Module) -> dict[str, int]:
    """Trainable and frozen parameters of each declared part (``Reader.PARTS``), in order."""
    from attnlab.models.parts import part_parameters, reader_parts

    return {
        part: sum(p.numel() for p in part_parameters(model, part).values())
        for part in reader_parts(model)
    }


class ModuleFlops(FlopCounterMode):
    """FlopCounterMode that also gives each counted FLOP to the innermost module of ``model``
    running when it was done (its attribute path; "" = the reader's own code), in ``own``.
    Its parents in the call stack do not get it again, so ``own`` sums to the total.

    Only torch's public API: at every entry to and exit from a module, the counter's total
    so far (``get_total_flops``) has grown by what the module then innermost did."""

    def __init__(self, model: nn.Module):
        super().__init__(display=False)
        self.paths = {id(m): name for name, m in model.named_modules()}
        self.stack: list[str] = []
        self.own: Counter[str] = Counter()
        self.handles: list[Any] = []
        self.seen = 0  # the total when last given out

    def _give(self) -> None:
        """What was counted since the last module entry or exit, to the innermost module."""
        total = self.get_total_flops()
        if total != self.seen:
            self.own[self.stack[-1] if self.stack else ""] += total - self.seen
            self.seen = total

    def __enter__(self):
        def pre(module, _args):
            if id(module) in self.paths:
                self._give()
                self.stack.append(self.paths[id(module)])

        def post(module, _args, _out):
            if id(module) in self.paths and self.stack:
                self._give()
                self.stack.pop()

        self.handles = [
            nn.modules.module.register_module_forward_pre_hook(pre),
            nn.modules.module.register_module_forward_hook(post),
        ]
        self.seen = 0
        return super().__enter__()

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        out = super().__exit__(*exc)
        self._give()
        return out


def count_forward(model: nn.Module, images: torch.Tensor, widths: torch.Tensor, labels: list[str]):
    """Forward FLOPs of teacher forcing ``labels`` (the training forward, no gradient):
    (total, own FLOPs by module path)."""
    register_formulas()
    model.eval()
    with torch.no_grad(), ModuleFlops(model) as counter:
        model.loss(images, widths, labels)
    return int(counter.get_total_flops()), dict(counter.own)


def by_part(model: nn.Module, own: dict[str, int]) -> dict[str, int]:
    """Module FLOPs summed by declared part; what no part holds (the reader's own code) is
    ``other``."""
    from attnlab.models.parts import reader_parts

    owner = {attr: part for part, attrs in reader_parts(model).items() for attr in attrs}
    out = dict.fromkeys([*reader_parts(model), "other"], 0)
    for path, n in own.items():
        out[owner.get(path.split(".")[0], "other")] += n
    return out


def term_counted(terms: list[costs.Term], own: dict[str, int]) -> list[int]:
    """For each closed-form term, the counted FLOPs of its module: its own and its
    descendants', except those that another term names more closely."""
    paths = [t.module for t in terms]

    def owner(path: str) -> str | None:
        inside = [p for p in paths if path == p or path.startswith(p + ".")]
        return max(inside, key=len) if inside else None

    got: Counter[str] = Counter()
    for path, n in own.items():
        if (p := owner(path)) is not None:
            got[p] += n
    return [got[t.module] for t in terms]


def cudnn_rnn_flops(
    input_shape: tuple[int, ...],
    hidden: int,
    layers: int,
    bidirectional: bool,
    mode: int,
    packed: bool,
) -> int:
    """Forward FLOPs of cuDNN's RNN kernel: input (positions, features) when ``packed``, else
    (B, T, features) or (T, B, features); the count of the same RNN decomposed on CPU."""
    positions = input_shape[0] if packed else input_shape[0] * input_shape[1]
    gates, size, total = RNN_GATES[int(mode)], input_shape[-1], 0
    dirs = 2 if bidirectional else 1
    for _ in range(layers):
        total += dirs * positions * 2 * gates * hidden * (size + hidden)
        size = dirs * hidden
    return total


def attention_flops(q: Any, k: Any, v: Any, backward: bool = False) -> int:
    """FLOPs of scaled dot-product attention on shapes (B, H, Tq, D), (B, Hk, Tk, D),
    (B, Hk, Tk, Dv): scores (q @ k^T) and weighted sums (weights @ v), 2 FLOPs a
    multiply-add; the backward recomputes the scores and takes the gradients of the scores,
    v, q and k (as torch counts its own fused kernels)."""
    b, h, tq, d = q
    tk, dv = k[2], v[3]
    forward = 2 * b * h * tq * tk * (d + dv)
    if not backward:
        return forward
    return 2 * b * h * tq * tk * (d + 2 * dv + 2 * d)


@functools.cache
def register_formulas() -> list[str]:
    """Give torch's counter formulas for the kernels it has none for, which would count 0:
    cuDNN's RNN (an ``nn.GRU`` on CUDA) and CPU's fused attention
    (``F.scaled_dot_product_attention`` on CPU), each forward and backward (the backward of
    an RNN: 2x its forward, the gradients of inputs and of weights). Returns the ops given
    one; registered once per process, for every counter (the bench's too)."""
    aten, done = torch.ops.aten, []

    def add(name: str, fn, raw: bool) -> None:
        op = getattr(aten, name, None)
        if op is None:
            return
        try:
            register_flop_formula(op, get_raw=raw)(fn)
        except RuntimeError as err:  # torch counts it itself (a newer torch): its formula
            if "duplicate" not in str(err):
                raise
            return
        done.append(name)

    def rnn(inp, weight, stride0, buf, hx, cx, mode, hidden, proj, layers, *rest, **kw):
        # rest: batch_first, dropout, train, bidirectional, batch_sizes, dropout_state
        packed = len(rest) > 4 and rest[4] is not None and len(rest[4]) > 0
        return cudnn_rnn_flops(
            tuple(inp.shape), int(hidden), int(layers), bool(rest[3]), mode, packed
        )

    def rnn_backward(inp, weight, stride0, buf, hx, cx, out, *rest, **kw):
        # rest: grad_output, grad_hy, grad_cy, mode, hidden, proj, layers, batch_first,
        # dropout, train, bidirectional, batch_sizes, ...
        mode, hidden, layers, bidir, sizes = rest[3], rest[4], rest[6], rest[10], rest[11]
        packed = sizes is not None and len(sizes) > 0
        shape = tuple(inp.shape)
        return 2 * cudnn_rnn_flops(shape, int(hidden), int(layers), bool(bidir), mode, packed)

    def sdpa(q, k, v, *args, out_shape=None, **kw):
        return attention_flops(q, k, v)

    def sdpa_backward(grad_out, q, k, v, *args, out_shape=None, **kw):
        return attention_flops(q, k, v, backward=True)

    add("_cudnn_rnn", rnn, True)
    add("_cudnn_rnn_backward", rnn_backward, True)
    add("_scaled_dot_product_flash_attention_for_cpu", sdpa, False)
    add("_scaled_dot_product_flash_attention_for_cpu_backward", sdpa_backward, False)
    return done


def strips(cfg: Any, length: int, n: int):
    """``n`` strips of ``length`` digits, the same for every reader and run (drawn from
    ``data.eval_seed``, as the fixed test sets are)."""
    from attnlab.data.strips import StripSynth, fixed_set

    return fixed_set(StripSynth(cfg.data), "cost", length, n)


def count_strips(model: nn.Module, batch: Any) -> list[dict[str, Any]]:
    """Each strip of ``batch`` counted alone (no padding): its columns, steps, total and
    own-by-module FLOPs, and the reader's closed-form terms (None: it has none)."""
    device = next(model.parameters()).device
    out = []
    for i, label in enumerate(batch.labels):
        images = batch.images[i : i + 1, :, : int(batch.widths[i])].to(device)
        widths = batch.widths[i : i + 1].to(device)
        total, own = count_forward(model, images, widths, [label])
        columns = int(model.encoder.column_lengths(widths)[0])
        steps = len(label) + 1
        terms = model.flop_terms(columns, steps)
        out.append({"columns": columns, "steps": steps, "total": total, "own": own, "terms": terms})
    return out


def _key(cfg: Any) -> str:
    return OmegaConf.to_yaml({"model": cfg.model, "data": cfg.data}, sort_keys=True)


def variant_cost(cfg: DictConfig, length: int, n: int = 4) -> dict[str, float]:
    """A config's cost, for a table beside its scores: parameters by part (``params_<part>``,
    ``params``) and forward MFLOP per strip of ``length`` digits (``mflop``, the mean over
    ``n`` fixed strips), on CPU: by the reader's closed form (equal to the counter's count,
    tested), or counted where it has none. Cached per (model, data) config."""
    return dict(_variant_cost(_key(cfg), length, n))


@functools.lru_cache(maxsize=64)
def _variant_cost(key: str, length: int, n: int) -> tuple[tuple[str, float], ...]:
    from attnlab.models import registry

    cfg = OmegaConf.create(key)
    torch.manual_seed(0)
    model_cfg = registry.config_node(str(cfg.model.name), cfg.model)
    model = registry.build(model_cfg, cfg.data.height, cfg.data.charset)
    parts = params_by_part(model)
    batch = strips(cfg, length, n)
    columns = model.encoder.column_lengths(batch.widths).tolist()
    terms = [model.flop_terms(int(c), length + 1) for c in columns]
    if any(t is None for t in terms):  # no closed form: counted (slower: the counter)
        flops = [c["total"] for c in count_strips(model, batch)]
    else:
        flops = [sum(x.flops for x in t) for t in terms]
    mflop = sum(flops) / len(flops) / 1e6
    out = {f"params_{p}": float(v) for p, v in parts.items()}
    out["params"] = float(sum(parts.values()))
    out["mflop"] = mflop
    return tuple(out.items())
