"""Readers that decode step by step, and their decoding, written once.

A ``StepwiseReader`` emits one token per step from a decoder state, the previous token and
what it may read of the strip (``Memory``). Teacher forcing, the cross-entropy loss with
BOS/EOS, batched greedy decoding and batched beam search are all here; a step-wise reader
supplies ``encode`` (optional), ``init_state`` and ``step``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import nn

from attnlab.config import ModelConfig
from attnlab.config.rules import check_at_least, finite, require
from attnlab.models import costs, ctc_loss, tokens
from attnlab.models.base import Decoded, Reader


@dataclass
class StepwiseConfig(ModelConfig):
    """Fields every step-wise reader has: the decoder's state size and token embedding."""

    dec_hidden: int = 128
    embed: int = 32
    # Weight of an auxiliary CTC loss on the encoder's column states during training (joint
    # CTC-attention, Kim et al., 2017): a digit-or-blank classifier on every column teaches
    # the shared encoder column features that name the glyph under them. Reading never uses
    # it. 0 = off.
    ctc_aux: float = 0.0

    @classmethod
    def check(cls, m: Any, height: int) -> None:
        super().check(m, height)
        check_at_least(m, "model", ("dec_hidden", "embed"))
        ok = finite(m.ctc_aux) and m.ctc_aux >= 0
        require(ok, "model.ctc_aux", m.ctc_aux, "must be >= 0 (a loss weight)")


@dataclass
class Memory:
    """What the decoder may read of a batch of strips. Readers may add tensor fields
    (a dataclass subclass); every tensor field is repeated row-wise for beam search."""

    states: torch.Tensor  # (B, T, 2H) column states
    mask: torch.Tensor  # (B, T) True on real columns
    summary: torch.Tensor  # (B, 2H) final states

    @property
    def lengths(self) -> torch.Tensor:
        return self.mask.sum(1)

    def rows(self, fn) -> Memory:
        """The same memory with ``fn`` applied to every tensor field's rows (dim 0)."""
        return type(self)(
            **{
                f.name: None if (x := getattr(self, f.name)) is None else fn(x)
                for f in fields(self)
            }
        )

    def repeat(self, k: int) -> Memory:
        """Each row repeated k times (beam search): (B, ...) -> (B*k, ...)."""
        return self.rows(lambda x: x.repeat_interleave(k, 0))


@dataclass
class AttentionMemory(Memory):
    """Memory whose keys are projected once per strip, not at every step (attention-style
    readers: attention, location)."""

    keys: torch.Tensor  # (B, T, A)


class StepwiseReader(Reader):
    """Encoder + a decoder that reads one token per step (embedding, init, output layer)."""

    # the output layer and the auxiliary CTC head: the tensors tied to the vocabulary
    PARTS = {"encoder": ("encoder",), "decoder": ("embed", "init"), "output": ("out", "ctc_head")}

    def __init__(
        self,
        cfg: StepwiseConfig,
        height: int,
        recurrent: bool = True,
        memory_size: int | None = None,
    ):
        """``memory_size``: the size of ``Memory.states`` when ``encode`` returns other states
        than the encoder's (the auxiliary CTC classifier reads them); default its own."""
        super().__init__(cfg, height, recurrent)
        self.embed = nn.Embedding(self.vocab, cfg.embed)
        state = self.encoder.state_size
        self.init = nn.Linear(state, cfg.dec_hidden)
        self.out = nn.Linear(cfg.dec_hidden + state + cfg.embed, self.vocab)
        assert cfg.ctc_aux >= 0, "StepwiseConfig.check"
        self.ctc_aux = float(cfg.ctc_aux)
        columns = memory_size or state
        classes = len(self.charset) + 1  # the charset, then the blank
        self.ctc_head = nn.Linear(columns, classes) if self.ctc_aux > 0 else None

    def shared_terms(self, columns: int, steps: int) -> list[costs.Term]:
        """The closed-form terms every step-wise reader shares (attnlab.models.costs): the
        encoder's, the decoder's initial state (once per strip, when it has one), the output
        layer (once per step) and the auxiliary CTC classifier (once per column, when on)."""
        terms = self.encoder.flop_terms(columns)
        init = getattr(self, "init", None)
        if isinstance(init, nn.Linear):
            n = costs.linear(1, init.in_features, init.out_features)
            terms.append(costs.Term("initial state", "decoder", "init", "strip", n))
        n = costs.linear(steps, self.out.in_features, self.out.out_features)
        terms.append(costs.Term("output layer", "output", "out", "step", n))
        if self.ctc_head is not None:
            n = costs.linear(columns, self.ctc_head.in_features, self.ctc_head.out_features)
            terms.append(costs.Term("CTC classifier", "output", "ctc_head", "column", n))
        return terms

    def encode(self, images: torch.Tensor, widths: torch.Tensor) -> Memory:
        states, lengths, summary = self.encoder(images, widths)
        cols = torch.arange(states.shape[1], device=states.device)
        mask = cols[None, :] < lengths[:, None]  # (B, T)
        return Memory(states, mask, summary)

    def decoding_memory(self, memory: Memory) -> Memory:
        """The memory free decoding reads (``read``; the ONNX export's encoder graph gives
        it): by default the one teacher forcing reads. A reader whose decoding differs (a
        stopping rule) marks it here."""
        return memory

    def init_state(self, memory: Memory) -> torch.Tensor:
        return torch.tanh(self.init(memory.summary)).float()  # (B, D)

    def step(self, memory: Memory, state: torch.Tensor, prev: torch.Tensor):
        """One output step: prev tokens (B,) -> logits (B, V), new state (B, D), weights
        (B, T) or None."""
        raise NotImplementedError

    def teacher_forcing(self, memory: Memory, inputs: torch.Tensor):
        """inputs (B, S) -> logits (B, S, V) and weights (B, S, T) or None; 0 where the input
        is PAD. Readers whose steps do not depend on each other's outputs may override this
        with one call.

        Steps run on the rows still reading (packed, as the encoder's GRU is): rows sorted
        longest first, step t computes only the rows whose input t is a token, so a batch
        of mixed lengths costs its tokens, not its longest reading times its size.
        """
        b, s = inputs.shape
        real = inputs != tokens.PAD  # (B, S): a prefix of each row
        order = torch.argsort(real.sum(1), descending=True, stable=True)
        active = real.sum(0).tolist()  # rows reading at each step, longest first
        memory, inputs = memory.rows(lambda x: x[order]), inputs[order]
        state = self.init_state(memory)
        logits, weights = [], []
        for t in range(s):
            n = active[t]
            if n == 0:
                break
            state = state[:n]
            step_logits, state, w = self.step(
                memory.rows(lambda x, n=n: x[:n]), state, inputs[:n, t]
            )
            logits.append(nn.functional.pad(step_logits, (0, 0, 0, b - n)))
            weights.append(None if w is None else nn.functional.pad(w, (0, 0, 0, b - n)))
        back = torch.argsort(order)
        out = _steps(logits, s)[back]
        return out, None if weights[0] is None else _steps(weights, s)[back]

    def forward(self, images, widths, inputs):
        """Teacher forcing from pixels: inputs (B, S) -> logits (B, S, V), weights or None."""
        return self.teacher_forcing(self.encode(images, widths), inputs)

    def loss(self, images, widths, labels):
        """Cross-entropy of every target token ``[d1..dL, EOS]`` given ``[BOS, d1..dL]``,
        plus ``ctc_aux`` x the CTC loss of the labels on the column states (when on)."""
        inputs, targets = tokens.encode(labels, self.charset)
        memory = self.encode(images, widths)
        logits, _ = self.teacher_forcing(memory, inputs.to(images.device))
        loss = nn.functional.cross_entropy(
            logits.float().reshape(-1, logits.shape[-1]),
            targets.to(images.device).reshape(-1),
            ignore_index=tokens.PAD,
        )
        if self.ctc_head is None:
            return loss
        logp = torch.log_softmax(self.ctc_head(memory.states).float(), -1)  # (B, T, CLASSES)
        # A strip too narrow for its label's CTC path (rare at the default strides) adds 0.
        aux = ctc_loss.ctc_nll(logp, memory.lengths, labels, True, self.charset)
        return loss + self.ctc_aux * aux

    @torch.no_grad()
    def read(self, images, widths, beam=1, lengths=None):
        memory = self.decoding_memory(self.encode(images, widths))
        if beam <= 1:
            return greedy(self, memory, lengths)
        return beam_search(self, memory, beam, lengths=lengths)

    def digit_probs(self, images, widths, texts):
        """Teacher forcing on ``texts``: (B, Lmax + 1) probability of each digit of each text,
        then of EOS, given the text before it; 0 past the end."""
        inputs, targets = tokens.encode(texts, self.charset)
        inputs, targets = inputs.to(images.device), targets.to(images.device)
        logits, _ = self(images, widths, inputs)
        p = torch.softmax(logits.float(), -1).gather(-1, targets[..., None])[..., 0]
        return p * (targets != tokens.PAD)


def _steps(per_step: list[torch.Tensor], s: int) -> torch.Tensor:
    """Step outputs, each (B, X), stacked to (B, S, X); 0 for the steps after the last."""
    out = torch.stack(per_step, 1)
    return nn.functional.pad(out, (0, 0, 0, s - out.shape[1]))


def gru_step(cell: nn.GRUCell, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """The recurrence runs in float32 even under autocast."""
    with torch.autocast(device_type=x.device.type, enabled=False):
        return cell(x.float(), state.float())


def step_limits(memory: Memory, lengths: torch.Tensor | None = None) -> torch.Tensor:
    """(B,) the most tokens a row may emit, EOS included: one per encoder column, plus EOS
    (a reading cannot hold more digits than its strip has columns); with oracle ``lengths``,
    exactly that many digits, plus EOS."""
    if lengths is not None:
        return lengths.to(memory.mask.device).long() + 1
    return memory.lengths + 1


@torch.no_grad()
def greedy(reader: StepwiseReader, memory: Memory, lengths: torch.Tensor | None = None) -> Decoded:
    """Batched greedy decoding; stops when every row has emitted EOS or reached its limit.

    ``lengths`` (B,): oracle-length decoding: EOS is forbidden before that many digits and
    forced right after them (the EOS decision is taken away; what is left is the alignment).
    """
    b = memory.states.shape[0]
    device = memory.states.device
    limits = step_limits(memory, lengths)
    oracle = lengths is not None
    state = reader.init_state(memory)
    prev = torch.full((b,), tokens.BOS, dtype=torch.long, device=device)
    done = torch.zeros(b, dtype=torch.bool, device=device)
    logp_sum = torch.zeros(b, device=device)
    ids, weights = [], []
    for t in range(int(limits.max())):
        logits, state, w = reader.step(memory, state, prev)
        logp = _constrain(torch.log_softmax(logits.float(), -1), t, limits, oracle)
        best, tok = logp.max(-1)
        tok = torch.where(done, tokens.PAD, tok)
        logp_sum += torch.where(done, 0.0, best)
        ids.append(tok)
        weights.append(w)
        done |= tok == tokens.EOS
        prev = tok
        if bool(done.all()):
            break
    ids_t = torch.stack(ids, 1)
    w_t = None if weights[0] is None else torch.stack(weights, 1).float()
    if w_t is not None:  # steps after a row's EOS carry no weights
        w_t = w_t * (ids_t != tokens.PAD)[..., None]
    steps = (ids_t != tokens.PAD).sum(1).clamp(min=1)
    return Decoded(
        tokens.to_texts(ids_t, reader.charset),
        logp_sum.exp(),
        w_t,
        memory.lengths,
        logp_sum / steps,
    )


def _constrain(logp: torch.Tensor, t: int, limits: torch.Tensor, oracle: bool) -> torch.Tensor:
    """What step ``t`` may emit. A reading holds digits then EOS: PAD and BOS are never
    emitted (masked after the softmax, so the other tokens' probabilities are untouched).
    Rows at their step limit may only emit EOS; under an oracle length, no row may emit EOS
    before it."""
    logp = logp.clone()
    logp[:, [tokens.PAD, tokens.BOS]] = float("-inf")
    if oracle:
        logp[:, tokens.EOS] = torch.where(t < limits - 1, float("-inf"), logp[:, tokens.EOS])
    force = t >= limits - 1
    if not bool(force.any()):
        return logp
    only_eos = torch.full_like(logp, float("-inf"))
    only_eos[:, tokens.EOS] = 0.0
    return torch.where(force[:, None], only_eos, logp)


@torch.no_grad()
def beam_search(
    reader: StepwiseReader,
    memory: Memory,
    width: int,
    alpha: float = 1.0,
    lengths: torch.Tensor | None = None,
) -> Decoded:
    """Batched beam search; hypotheses ranked by log-probability / length**alpha at the end
    (``Decoded.score``; greedy decoding's score is its log-probability / length too).

    At width 1 this is greedy decoding. The search is approximate: a beam can prune the
    path greedy decoding takes and end on readings that score lower. Greedy's reading is
    therefore kept as a candidate, so a wider beam never returns a reading its reader scores
    lower than greedy's.
    """
    if width <= 1:
        return greedy(reader, memory, lengths)
    b, k = memory.states.shape[0], width
    device = memory.states.device
    mem = memory.repeat(k)
    oracle = lengths is not None
    limits = step_limits(mem, None if lengths is None else lengths.repeat_interleave(k)).view(b, k)
    state = reader.init_state(mem)  # (B*K, D)
    prev = torch.full((b * k,), tokens.BOS, dtype=torch.long, device=device)
    scores = torch.full((b, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start identical: keep one
    done = torch.zeros(b, k, dtype=torch.bool, device=device)
    length = torch.zeros(b, k, device=device)
    hist = torch.zeros(b, k, 0, dtype=torch.long, device=device)
    whist = None
    rows = torch.arange(b, device=device)[:, None]
    for t in range(int(limits.max())):
        logits, state, w = reader.step(mem, state, prev)
        logp = torch.log_softmax(logits.float(), -1).view(b, k, -1)  # (B, K, V)
        logp = _constrain(logp.view(b * k, -1), t, limits.view(-1), oracle).view(b, k, -1)
        # A finished beam continues with PAD at no cost, so it keeps its score.
        finished = torch.full_like(logp, float("-inf"))
        finished[..., tokens.PAD] = 0.0
        logp = torch.where(done[..., None], finished, logp)
        cand = (scores[..., None] + logp).view(b, -1)  # (B, K*V)
        scores, flat = cand.topk(k, dim=-1)  # (B, K)
        beam, tok = flat // logp.shape[-1], flat % logp.shape[-1]
        hist = torch.cat([hist[rows, beam], tok[..., None]], -1)
        length = length[rows, beam] + (~done[rows, beam]).float()
        done = done[rows, beam] | (tok == tokens.EOS)
        src = (rows * k + beam).view(-1)
        state = state[src]
        if w is not None:
            w = w.view(b, k, -1)[rows, beam]  # (B, K, T)
            whist = (
                w[:, :, None] if whist is None else torch.cat([whist[rows, beam], w[:, :, None]], 2)
            )
        prev = tok.view(-1)
        if bool(done.all()):
            break
    norm = scores / length.clamp(min=1) ** alpha
    best = norm.argmax(-1)  # (B,)
    r = torch.arange(b, device=device)
    ids = hist[r, best]  # (B, S)
    weights = None
    if whist is not None:
        weights = whist[r, best].float() * (ids != tokens.PAD)[..., None]
    found = Decoded(
        tokens.to_texts(ids, reader.charset),
        scores[r, best].exp(),
        weights,
        memory.lengths,
        norm[r, best],
    )
    return _better(found, greedy(reader, memory, lengths))


def _better(a: Decoded, b: Decoded) -> Decoded:
    """Row by row, the reading of ``a`` or ``b`` that scores higher (``a`` on ties)."""
    take = b.score > a.score  # (B,)
    weights = None
    if a.weights is not None and b.weights is not None:
        s = max(a.weights.shape[1], b.weights.shape[1])
        wa, wb = (nn.functional.pad(w, (0, 0, 0, s - w.shape[1])) for w in (a.weights, b.weights))
        weights = torch.where(take[:, None, None], wb, wa)
    return Decoded(
        [tb if t else ta for ta, tb, t in zip(a.texts, b.texts, take.tolist(), strict=True)],
        torch.where(take, b.confidence, a.confidence),
        weights,
        a.columns,
        torch.where(take, b.score, a.score),
    )
