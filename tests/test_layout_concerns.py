"""Modules split by concern (issue 58, item 6), held apart: each piece says what it is for,
the lower piece never imports the one built on it, and what the split made possible holds
(step-wise decoding needs only ``init_state`` and ``step``; the CTC decoding needs no reader;
the probe's numbers and the lab's commands load without what they no longer share a module
with)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnlab.models import tokens
from attnlab.models.ctc_decode import search
from attnlab.models.decoder_memory import Memory
from attnlab.models.stepwise_search import beam_search, greedy

ROOT = Path(__file__).resolve().parent.parent

# module -> the modules built on it, which it must never import (lazily or not)
APART = {
    "attnlab.models.ctc_decode": ["attnlab.models.readers.ctc", "attnlab.models.registry"],
    "attnlab.models.decoder_memory": ["attnlab.models.stepwise", "attnlab.models.stepwise_search"],
    "attnlab.models.stepwise_search": ["attnlab.models.stepwise", "attnlab.models.registry"],
    "attnlab.models.readers.transformer_positions": [
        "attnlab.models.readers.transformer_attention",
        "attnlab.models.readers.transformer_layers",
        "attnlab.models.readers.transformer",
    ],
    "attnlab.models.readers.transformer_attention": [
        "attnlab.models.readers.transformer_layers",
        "attnlab.models.readers.transformer",
    ],
    "attnlab.models.readers.transformer_layers": ["attnlab.models.readers.transformer"],
    "attnlab.evaluation.probe_strips": ["attnlab.evaluation.probe_tables"],
    "attnlab.evaluation.occlusion": ["attnlab.evaluation.probe_tables"],
    "attnlab.evaluation.saliency": ["attnlab.evaluation.probe_tables"],
    "attnlab.evaluation.probe_summary": ["attnlab.evaluation.probe_tables"],
    "attnlab.evaluation.probe_tables": ["attnlab.evaluation.probe"],
    "attnlab.evaluation.figures.probe_example": ["attnlab.evaluation.probe"],
    "attnlab.tasks.tuned_plan": ["attnlab.tasks.tuned", "attnlab.tasks.run"],
    "attnlab.maintain.labcommands": ["attnlab.maintain.labfigures", "attnlab.api"],
    "attnlab.maintain.labfigures": ["attnlab.maintain.labcommands"],
}
EVERY_PROBE_PIECE = ["attnlab.evaluation.probe", "attnlab.evaluation.probe_tables"]


def _path(module: str) -> Path:
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def imported(module: str) -> set[str]:
    """Every attnlab module ``module`` names in an import, at the top or in a function."""
    found = set()
    for node in ast.walk(ast.parse(_path(module).read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return {m for m in found if m.startswith("attnlab")}


@pytest.mark.parametrize("module", sorted(APART))
def test_a_split_module_says_what_it_is_for_and_never_imports_what_is_built_on_it(module):
    tree = ast.parse(_path(module).read_text())
    assert len(ast.get_docstring(tree) or "") > 80, f"{module}: a docstring saying what it is for"
    above = APART[module] + (EVERY_PROBE_PIECE if ".evaluation." in module else [])
    above = [m for m in above if m != module]
    wrong = sorted(m for m in imported(module) for a in above if m == a or m.startswith(a + "."))
    assert wrong == [], f"{module} imports {wrong}"


class Stepper:
    """Not a reader, not a torch module: ``charset``, ``init_state`` and ``step`` only. Strip
    i (its memory's states hold i) reads ``texts[i]``: step t gives the text's t-th digit 0.9
    (EOS after the last), every other token 0.1 / 12."""

    charset = "0123456789"

    def __init__(self, texts: list[str]):
        self.texts = texts

    def init_state(self, memory):
        return torch.zeros(len(memory.states), 1)  # (B, 1): the step count

    def step(self, memory, state, prev):
        b = len(state)
        logits = torch.full((b, tokens.vocab_size(self.charset)), 0.1 / 12).log()
        for i in range(b):
            text = self.texts[int(memory.states[i, 0, 0])]  # beam search repeats the rows
            t = int(state[i, 0])
            tok = tokens.EOS if t >= len(text) else tokens.DIGIT0 + int(text[t])
            logits[i, tok] = torch.tensor(0.9).log()
        return logits, state + 1, None


def _memory(n: int, columns: int = 6) -> Memory:
    states = torch.arange(n, dtype=torch.float32)[:, None, None].expand(n, columns, 4)
    return Memory(states, torch.ones(n, columns, dtype=torch.bool), None)


def test_step_wise_decoding_needs_only_init_state_and_step():
    texts = ["042", "7", "31337"]
    read = greedy(Stepper(texts), _memory(3))
    assert read.texts == texts and read.weights is None
    assert torch.allclose(read.confidence, torch.tensor([0.9**4, 0.9**2, 0.9**6]))
    beam = beam_search(Stepper(texts), _memory(3), width=3)
    assert beam.texts == texts
    assert torch.allclose(beam.score, read.score)
    oracle = greedy(Stepper(texts), _memory(3), lengths=torch.tensor([2, 2, 2]))
    assert oracle.texts == ["04", "70", "31"]  # EOS taken away, then forced


def test_ctc_decoding_reads_posteriors_without_a_reader():
    path = [1, 1, 10, 1, 4, 10]  # "1", blank, "1", "4", blank: reads "114"
    logp = torch.full((1, 6, 11), 0.01).log()
    logp[0, torch.arange(6), torch.tensor(path)] = torch.tensor(0.9).log()
    logp = logp.log_softmax(-1)
    for beam in (1, 4):
        read = search(logp, torch.tensor([6]), beam)
        assert read.texts == ["114"] and read.weights.shape == (1, 4, 6)


@pytest.mark.parametrize(
    "module, absent",
    [
        ("attnlab.evaluation.probe_summary", "torch"),  # what the report imports
        ("attnlab.maintain.labcommands", "pandas"),  # the commands, not the figures
        ("attnlab.tasks.tuned_plan", "attnlab.tasks.run"),  # the plan, not the stages
    ],
)
def test_a_piece_loads_without_what_it_no_longer_shares_a_module_with(module, absent):
    code = f"import sys, {module}; print({absent!r} in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
