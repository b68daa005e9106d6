"""The two readers and their decoding.

Both share the column encoder and the same decoder shape (a GRU over the previous token);
they differ only in what of the strip reaches the decoder:

- ``FixedContextReader``: one summary of the strip (final forward and backward states),
  used to start the decoder and given again at every output step;
- ``AttentionReader``: at every step a new context, the weighted sum of the column states
  with the previous decoder state as the query (Bahdanau et al.).

Each reader exposes ``encode`` -> ``Memory``, ``init_state`` and ``step``; teacher forcing,
greedy and beam decoding are written once on top of these.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from attnlab import tokens
from attnlab.config import ModelConfig, Reader
from attnlab.models.attention import Attention
from attnlab.models.encoder import ColumnEncoder


@dataclass
class Memory:
    """What the decoder may read of a batch of strips."""

    states: torch.Tensor  # (B, T, 2H) column states
    mask: torch.Tensor  # (B, T) True on real columns
    summary: torch.Tensor  # (B, 2H) final states
    keys: torch.Tensor | None  # (B, T, A) projected once per strip (attention reader)

    @property
    def lengths(self) -> torch.Tensor:
        return self.mask.sum(1)

    def repeat(self, k: int) -> Memory:
        """Each row repeated k times (beam search): (B, ...) -> (B*k, ...)."""

        def rep(x):
            return None if x is None else x.repeat_interleave(k, dim=0)

        return Memory(rep(self.states), rep(self.mask), rep(self.summary), rep(self.keys))


@dataclass
class Readings:
    """Decoded readings of a batch."""

    ids: torch.Tensor  # (B, S) token ids, EOS-terminated where the reader stopped
    texts: list[str]
    confidence: torch.Tensor  # (B,) probability of the reading (product over its tokens)
    weights: torch.Tensor | None  # (B, S, T) attention weights of every step, or None


class BaseReader(nn.Module):
    kind: Reader

    def __init__(self, cfg: ModelConfig, height: int):
        super().__init__()
        self.encoder = ColumnEncoder(cfg, height)
        self.embed = nn.Embedding(tokens.VOCAB, cfg.embed)
        state = self.encoder.state_size
        self.init = nn.Linear(state, cfg.dec_hidden)
        self.out = nn.Linear(cfg.dec_hidden + state + cfg.embed, tokens.VOCAB)

    def encode(self, images: torch.Tensor, widths: torch.Tensor) -> Memory:
        states, lengths, summary = self.encoder(images, widths)
        cols = torch.arange(states.shape[1], device=states.device)
        mask = cols[None, :] < lengths[:, None]  # (B, T)
        return Memory(states, mask, summary, self._keys(states))

    def _keys(self, states: torch.Tensor) -> torch.Tensor | None:
        return None

    def init_state(self, memory: Memory) -> torch.Tensor:
        return torch.tanh(self.init(memory.summary)).float()  # (B, D)

    def step(self, memory: Memory, state: torch.Tensor, prev: torch.Tensor):
        """One output step: prev tokens (B,) -> logits (B, V), new state (B, D), weights."""
        raise NotImplementedError

    def forward(self, images, widths, inputs):
        """Teacher forcing: inputs (B, S) -> logits (B, S, V) and weights (B, S, T) or None."""
        memory = self.encode(images, widths)
        state = self.init_state(memory)
        logits, weights = [], []
        for t in range(inputs.shape[1]):
            step_logits, state, w = self.step(memory, state, inputs[:, t])
            logits.append(step_logits)
            weights.append(w)
        return torch.stack(logits, 1), None if weights[0] is None else torch.stack(weights, 1)


def _gru_step(cell: nn.GRUCell, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """The recurrence runs in float32 even under autocast."""
    with torch.autocast(device_type=x.device.type, enabled=False):
        return cell(x.float(), state.float())


class FixedContextReader(BaseReader):
    kind = Reader.fixed

    def __init__(self, cfg: ModelConfig, height: int):
        super().__init__(cfg, height)
        # A GRU layer rather than a cell: with the same summary at every step, teacher
        # forcing runs the whole output sequence in one call.
        self.rnn = nn.GRU(cfg.embed + self.encoder.state_size, cfg.dec_hidden, batch_first=True)

    def _run(self, memory: Memory, state: torch.Tensor, prev: torch.Tensor):
        """prev (B, S) -> logits (B, S, V), final state (B, D)."""
        e = self.embed(prev)  # (B, S, E)
        context = memory.summary[:, None, :].expand(-1, prev.shape[1], -1)  # (B, S, 2H)
        with torch.autocast(device_type=e.device.type, enabled=False):
            out, h = self.rnn(torch.cat([e, context.to(e.dtype)], -1).float(), state[None])
        logits = self.out(torch.cat([out.to(e.dtype), context.to(e.dtype), e], -1))
        return logits, h[0]

    def step(self, memory: Memory, state: torch.Tensor, prev: torch.Tensor):
        logits, state = self._run(memory, state, prev[:, None])
        return logits[:, 0], state, None

    def forward(self, images, widths, inputs):
        memory = self.encode(images, widths)
        logits, _ = self._run(memory, self.init_state(memory), inputs)
        return logits, None


class AttentionReader(BaseReader):
    kind = Reader.attention

    def __init__(self, cfg: ModelConfig, height: int):
        super().__init__(cfg, height)
        self.attention = Attention(
            cfg.scorer, cfg.dec_hidden, self.encoder.state_size, cfg.attn_dim
        )
        self.cell = nn.GRUCell(cfg.embed + self.encoder.state_size, cfg.dec_hidden)

    def _keys(self, states: torch.Tensor) -> torch.Tensor:
        return self.attention.keys(states)

    def step(self, memory: Memory, state: torch.Tensor, prev: torch.Tensor):
        e = self.embed(prev)  # (B, E)
        context, weights = self.attention(state, memory.keys, memory.states, memory.mask)
        state = _gru_step(self.cell, torch.cat([e, context.to(e.dtype)], -1), state)
        logits = self.out(torch.cat([state.to(e.dtype), context.to(e.dtype), e], -1))
        return logits, state, weights  # weights (B, T)


READERS: dict[Reader, type[BaseReader]] = {
    Reader.fixed: FixedContextReader,
    Reader.attention: AttentionReader,
}


def build_reader(cfg: ModelConfig, height: int) -> BaseReader:
    return READERS[Reader(cfg.name)](cfg, height)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# ---------------------------------------------------------------------------------------------
# Decoding


def step_limits(memory: Memory) -> torch.Tensor:
    """(B,) the most tokens a row may emit, EOS included: one per encoder column, plus EOS.

    A reading cannot hold more digits than its strip has columns.
    """
    return memory.lengths + 1


@torch.no_grad()
def greedy(reader: BaseReader, memory: Memory) -> Readings:
    """Batched greedy decoding; stops when every row has emitted EOS or reached its limit."""
    b = memory.states.shape[0]
    device = memory.states.device
    limits = step_limits(memory)
    state = reader.init_state(memory)
    prev = torch.full((b,), tokens.BOS, dtype=torch.long, device=device)
    done = torch.zeros(b, dtype=torch.bool, device=device)
    logp_sum = torch.zeros(b, device=device)
    ids, weights = [], []
    for t in range(int(limits.max())):
        logits, state, w = reader.step(memory, state, prev)
        logp = _forced_eos(torch.log_softmax(logits.float(), -1), t >= limits - 1)
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
    return Readings(ids_t, tokens.decode(ids_t), logp_sum.exp(), w_t)


def _forced_eos(logp: torch.Tensor, force: torch.Tensor) -> torch.Tensor:
    """Rows where ``force`` is set may only emit EOS (their step limit is reached)."""
    if not bool(force.any()):
        return logp
    only_eos = torch.full_like(logp, float("-inf"))
    only_eos[:, tokens.EOS] = 0.0
    return torch.where(force[:, None], only_eos, logp)


@torch.no_grad()
def beam_search(reader: BaseReader, memory: Memory, width: int, alpha: float = 1.0) -> Readings:
    """Batched beam search; hypotheses ranked by log-probability / length**alpha at the end.

    At width 1 this is greedy decoding.
    """
    if width <= 1:
        return greedy(reader, memory)
    b, k = memory.states.shape[0], width
    device = memory.states.device
    mem = memory.repeat(k)
    limits = step_limits(mem).view(b, k)
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
        logp = _forced_eos(logp.view(b * k, -1), (t >= limits - 1).view(-1)).view(b, k, -1)
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
    return Readings(ids, tokens.decode(ids), scores[r, best].exp(), weights)


def decode(reader: BaseReader, memory: Memory, beam: int = 1) -> Readings:
    return greedy(reader, memory) if beam <= 1 else beam_search(reader, memory, beam)
