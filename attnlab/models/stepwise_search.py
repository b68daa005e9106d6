"""Free decoding of a step-wise reader, written once: batched greedy decoding and batched
beam search, each under an optional oracle length (the EOS decision taken away).

Both read a ``Memory`` (attnlab.models.decoder_memory) through the reader's ``init_state``
and ``step`` only (``Stepper``), so any step-wise reader (attnlab.models.stepwise) decodes
the same way, and so does a wrapper that records its steps (attnlab.export.parity).
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import nn

from attnlab.models import tokens
from attnlab.models.base import Decoded
from attnlab.models.decoder_memory import Memory


class Stepper(Protocol):
    """What decoding asks of a step-wise reader (``StepwiseReader`` has it)."""

    charset: str

    def init_state(self, memory: Memory) -> torch.Tensor: ...

    def step(self, memory: Memory, state: torch.Tensor, prev: torch.Tensor): ...


def step_limits(memory: Memory, lengths: torch.Tensor | None = None) -> torch.Tensor:
    """(B,) the most tokens a row may emit, EOS included: one per encoder column, plus EOS
    (a reading cannot hold more digits than its strip has columns); with oracle ``lengths``,
    exactly that many digits, plus EOS."""
    if lengths is not None:
        return lengths.to(memory.mask.device).long() + 1
    return memory.lengths + 1


@torch.no_grad()
def greedy(reader: Stepper, memory: Memory, lengths: torch.Tensor | None = None) -> Decoded:
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
    reader: Stepper,
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
