"""Adding a reader is one module (plus one YAML inside the package): a throwaway third reader,
defined only in this test and loaded as a plugin, trains, evaluates, gets attention maps
because its readings carry weights, and appears in the report — no attnlab file names it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PLUGIN = '''
"""A throwaway reader: uniform attention over the real columns (a mean context)."""
from dataclasses import dataclass

import torch

from attnlab.models.stepwise import StepwiseConfig, StepwiseReader, gru_step
from attnlab.models.registry import register


@dataclass
class UniformConfig(StepwiseConfig):
    dec_hidden: int = 32
    embed: int = 8


@register("uniform", UniformConfig, "uniform reader: the mean of the column states at every step")
class UniformReader(StepwiseReader):
    def __init__(self, cfg, height):
        super().__init__(cfg, height)
        self.cell = torch.nn.GRUCell(cfg.embed + self.encoder.state_size, cfg.dec_hidden)

    def step(self, memory, state, prev):
        weights = memory.mask.float() / memory.mask.sum(1, keepdim=True)  # (B, T)
        context = torch.einsum("bt,bth->bh", weights, memory.states)
        e = self.embed(prev)
        state = gru_step(self.cell, torch.cat([e, context], -1), state)
        return self.out(torch.cat([state, context, e], -1)), state, weights
'''


@pytest.mark.slow
def test_a_third_reader_registered_only_here_runs_end_to_end(tmp_path, cli_env):
    from helpers.cli import run_in_one_process

    (tmp_path / "uniform_reader.py").write_text(textwrap.dedent(PLUGIN))
    env = {**cli_env, "PYTHONPATH": str(tmp_path), "ATTNLAB_READERS": "uniform_reader"}

    # The plugin's commands one after the other in one fresh process (each command as the
    # CLI runs it, the reader registered by ATTNLAB_READERS there, never in pytest's).
    run = tmp_path / "run"
    listed, trained, evaluated, reported = run_in_one_process(
        [
            ["readers"],
            ["train", "model=uniform", "preset=tiny", "train.progress=plain",
             f"hydra.run.dir={run}"],
            ["eval", run, "eval.n=8", "eval.maps_k=1", "eval.figures=true"],
            ["report", run, "--out", tmp_path / "report"],
        ],
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert listed.returncode == 0 and "uniform reader: the mean" in listed.stdout
    assert trained.returncode == 0, trained.stderr
    assert evaluated.returncode == 0, evaluated.stderr
    ev = run / "eval" / "synthetic-greedy"
    assert (ev / "eval.json").is_file() and list((ev / "maps").glob("len*.png"))
    assert (ev / "attention_summary.png").is_file() and (ev / "pace.png").is_file()

    assert reported.returncode == 0, reported.stderr
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "uniform" in summary
    page = (tmp_path / "report" / "index.html").read_text()
    assert "uniform reader: the mean of the column states" in page

    # Without the plugin loaded, its checkpoint is refused with one clear line (a real
    # process of the CLI's own).
    del env["ATTNLAB_READERS"]
    res = subprocess.run(
        [sys.executable, "-m", "attnlab.cli", "eval", str(run), "eval.n=4"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 2 and "unknown reader 'uniform'" in res.stderr
    assert "ATTNLAB_READERS" in res.stderr and res.stderr.count("\n") == 1
