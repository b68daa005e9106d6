"""How far a training step is from what the machine can do: the FLOPs of one training step
(forward and backward, counted by ``torch.utils.flop_counter.FlopCounterMode``), and the
machine's measured fp32 matmul peak on the same threads.

The counter counts the matrix products and convolutions (GRU and GRU-cell gates included;
cuDNN's RNN and CPU's fused attention through formulas attnlab.evaluation.cost_count registers);
element-wise work (activations, softmax, the loss) is not counted, so the ratio to the peak
is that of the work a matmul unit could do.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from attnlab.runtime import autocast


def step_flops(trainer: Any) -> dict[str, Any]:
    """FLOPs of one training step of ``trainer`` (a Trainer): one batch of its stream, forward
    and backward, under the trainer's autocast; the gradients are dropped and the optimiser
    not stepped. Per strip: over the step's ``batch_size x accumulate`` strips."""
    from attnlab.evaluation.cost_count import register_formulas

    register_formulas()  # cuDNN's RNN and CPU's fused attention: counted, not 0
    model = trainer.model
    model.train()
    t = trainer.cfg.train
    total = 0
    with FlopCounterMode(display=False) as counter:
        for _ in range(t.accumulate):
            batch = trainer.stream.next()
            images = batch.images.to(trainer.device)
            widths = batch.widths.to(trainer.device)
            with autocast(trainer.device, trainer.autocast):
                loss = model.loss(images, widths, batch.labels)
            loss.backward()
    total = counter.get_total_flops()
    trainer.opt.zero_grad(set_to_none=True)
    strips = t.batch_size * t.accumulate
    return {"flops_per_step": int(total), "flops_per_strip": total / strips, "strips": strips}


def matmul_peak(n: int = 2048, repeats: int = 5, device: str = "cpu") -> dict[str, Any]:
    """GFLOP/s of an (n x n) @ (n x n) fp32 matmul on the current torch threads, best of
    ``repeats`` (after one warm-up): the machine's practical fp32 peak."""
    dev = torch.device(device)
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=gen).to(dev)
    b = torch.randn(n, n, generator=gen).to(dev)
    out = torch.empty(n, n, device=dev)
    torch.mm(a, b, out=out)
    best = float("inf")
    for _ in range(repeats):
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.mm(a, b, out=out)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    gflops = 2 * n**3 / best / 1e9
    return {
        "n": n,
        "gflop_per_s": round(gflops, 2),
        "best_s": best,
        "threads": torch.get_num_threads(),
    }


def achieved(strips_per_s: float, flops_per_strip: float, peak_gflop_per_s: float) -> dict:
    """Training GFLOP/s from its strips/s, and its ratio to the peak."""
    gflops = strips_per_s * flops_per_strip / 1e9
    return {"gflop_per_s": gflops, "peak_ratio": gflops / peak_gflop_per_s}
