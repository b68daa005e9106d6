"""Reading CTC posteriors (Graves et al., 2006): the CTC reader's decoding, written once.

Log posteriors (B, T, C) over the encoder's columns, C = characters + blank (the blank is
the last class), are read as the best path (greedy), the oracle path of a given length, or
by prefix beam search; a reading's paths are collapsed, aligned (Viterbi) and summed (the
forward algorithm). ``search`` returns the reader's ``Decoded``; ``digit_probs_of`` its
teacher-forced digit probabilities. The reader itself: attnlab.models.readers.ctc.

``weights`` (B, S, T): digit row i is the posterior of digit i's class over the columns of
its run on the decoded path (the argmax path for greedy, the oracle path under ``lengths``,
the Viterbi alignment of the chosen reading for beam), normalised; the EOS row is the blank
posterior over the columns after the last digit's run (uniform over the real columns when
there are none).

``confidence`` = P(reading | strip) summed over all its alignments (the forward algorithm),
for greedy, beam and oracle readings alike: the best path alone holds a fraction of it (mean
0.33 against 0.98 at 16 digits, read 99% right). ``score`` = its log / (digits + 1), the
step-wise readers' normalisation; beam search ranks its readings, the best path's among
them, by it, so it never scores below greedy.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnlab.models.base import Decoded
from attnlab.models.ctc_loss import DIGITS, label_targets

NEG = float("-inf")


def _real(cols: torch.Tensor, t: int) -> torch.Tensor:
    return torch.arange(t, device=cols.device)[None, :] < cols[:, None]  # (B, T)


def _runs(path: torch.Tensor, real: torch.Tensor, blank: int):
    """Paths (B, T) of classes -> where a new character starts (B, T), character counts (B,)
    and the run index of every column (B, T) (-1 on blanks and padding)."""
    path = path.masked_fill(~real, blank)
    prev = F.pad(path[:, :-1], (1, 0), value=blank)
    emit = (path != blank) & (path != prev)  # (B, T) a new character starts here
    run = torch.where(path != blank, emit.cumsum(1) - 1, -1)  # (B, T)
    return path, emit, run


def collapse(path: torch.Tensor, real: torch.Tensor, charset: str = DIGITS):
    """Paths (B, T) of classes -> texts, character counts (B,), run index of every column
    (B, T) (-1 on blanks and padding): a non-blank column belongs to the last character
    emitted. Class i is ``charset[i]``, the blank ``len(charset)``."""
    path, emit, run = _runs(path, real, len(charset))
    texts = [
        "".join(charset[c] for c, e in zip(p, m, strict=True) if e)
        for p, m in zip(path.tolist(), emit.tolist(), strict=True)
    ]
    return texts, emit.sum(1), run


def forced_align(logp, cols, targets, tlen):
    """Viterbi: the most probable path (B, T) that collapses to each target, and its log
    probability (B,) (-inf when the strip has too few columns; the path is then arbitrary).
    logp (B, T, C), targets (B, L) digit classes, tlen (B,)."""
    b, t, c = logp.shape
    blank = c - 1
    u = 2 * targets.shape[1] + 1
    ext = torch.full((b, u), blank, dtype=torch.long, device=logp.device)  # (B, U)
    ext[:, 1::2] = targets
    states = torch.arange(u, device=logp.device)
    ext = torch.where(states[None] < 2 * tlen[:, None] + 1, ext, blank)
    skip = (ext != blank) & (ext != F.pad(ext[:, :-2], (2, 0), value=blank))  # u-2 -> u allowed
    skip[:, :2] = False
    alpha = torch.full((b, u), NEG, device=logp.device)
    emit0 = logp[:, 0].gather(1, ext[:, :2])
    alpha[:, :2] = torch.where(states[None, :2] < 2 * tlen[:, None] + 1, emit0, NEG)
    real = _real(cols, t)
    back = torch.zeros(b, t, u, dtype=torch.uint8, device=logp.device)  # (B, T, U) states back
    for i in range(1, t):
        one = F.pad(alpha[:, :-1], (1, 0), value=NEG)
        two = torch.where(skip, F.pad(alpha[:, :-2], (2, 0), value=NEG), NEG)
        best, step = torch.stack([alpha, one, two], -1).max(-1)  # (B, U): 0, 1 or 2 back
        new = best + logp[:, i].gather(1, ext)
        alpha = torch.where(real[:, i, None], new, alpha)
        back[:, i] = torch.where(real[:, i, None], step, 0).to(torch.uint8)
    last = 2 * tlen  # final blank, or (when L > 0) final digit one before it
    end_blank = alpha.gather(1, last[:, None])[:, 0]
    end_digit = torch.where(tlen > 0, alpha.gather(1, (last - 1).clamp(min=0)[:, None])[:, 0], NEG)
    score, which = torch.stack([end_blank, end_digit], -1).max(-1)
    state = last - which
    path = torch.full((b, t), blank, dtype=torch.long, device=logp.device)
    rows = torch.arange(b, device=logp.device)
    for i in range(t - 1, -1, -1):
        path[:, i] = torch.where(real[:, i], ext[rows, state], blank)
        state = (state - back[rows, i, state].long()).clamp(min=0)
    return path, score


def oracle_path(logp, cols, lengths):
    """The most probable path (B, T) whose collapse has exactly ``lengths`` digits (or, on
    a strip too short for that, as many as it can), and its log probability (B,).

    A DP over columns x (digits emitted, class of the last column), vectorised over rows."""
    b, t, c = logp.shape
    blank = c - 1
    n = int(lengths.max()) + 1
    dev = logp.device
    score = torch.full((b, n, c), NEG, device=dev)  # (B, N, C)
    score[:, 0, blank] = logp[:, 0, blank]
    if n > 1:
        score[:, 1, :blank] = logp[:, 0, :blank]
    back = torch.zeros(b, t, n, c, dtype=torch.int64 if c > 256 else torch.uint8, device=dev)
    real = _real(cols, t)
    digits = torch.arange(blank, device=dev)  # the character classes
    for i in range(1, t):
        top, arg = score.topk(2, dim=-1)  # (B, N, 2)
        blank_prev = arg[..., 0]
        # A new digit d follows any other class: the best of them, one digit fewer.
        other = torch.where(arg[..., :1] == digits, top[..., 1:], top[..., :1])  # (B, N, C-1)
        other_arg = torch.where(arg[..., :1] == digits, arg[..., 1:], arg[..., :1])
        other = F.pad(other[:, :-1], (0, 0, 1, 0), value=NEG)
        other_arg = F.pad(other_arg[:, :-1], (0, 0, 1, 0))
        stay = score[..., :blank]
        new_d = torch.maximum(stay, other) + logp[:, i, None, :blank]
        arg_d = torch.where(stay >= other, digits, other_arg)
        new = torch.cat([new_d, (top[..., :1] + logp[:, i, None, blank:])], -1)  # (B, N, C)
        arg_new = torch.cat([arg_d, blank_prev[..., None]], -1)
        keep = real[:, i, None, None]
        score = torch.where(keep, new, score)
        same = torch.arange(c, device=dev).expand(b, n, c)
        back[:, i] = torch.where(keep, arg_new, same).to(back.dtype)
    best, cls = score.max(-1)  # (B, N)
    counts = torch.arange(n, device=dev)
    ok = (best > NEG) & (counts[None] <= lengths[:, None])
    emitted = torch.where(ok, counts[None], -1).max(1).values.clamp(min=0)  # (B,)
    rows = torch.arange(b, device=dev)
    total, cur = best[rows, emitted], cls[rows, emitted]
    path = torch.full((b, t), blank, dtype=torch.long, device=dev)
    for i in range(t - 1, -1, -1):
        path[:, i] = torch.where(real[:, i], cur, blank)
        prev = back[rows, i, emitted, cur].long()
        emitted = emitted - ((cur != blank) & (prev != cur) & real[:, i]).long()
        cur = torch.where(real[:, i], prev, cur)
    return path, total


def prefix_beam(logp, cols, width: int, lengths=None):
    """CTC prefix beam search, batched: the ``width`` prefixes (B, K, T) of digit classes
    (-1 padded), their digit counts (B, K) and whether they are alive (B, K). Under oracle
    ``lengths`` no prefix grows past its row's length. Probabilities are recomputed exactly
    by the caller, so this only has to find the readings."""
    b, t, c = logp.shape
    blank = c - 1
    k, dev = width, logp.device
    hist = torch.full((b, k, t), -1, dtype=torch.long, device=dev)  # (B, K, T)
    n = torch.zeros(b, k, dtype=torch.long, device=dev)
    last = torch.full((b, k), -1, dtype=torch.long, device=dev)
    pb = torch.full((b, k), NEG, device=dev)
    pb[:, 0] = 0.0  # one empty prefix; the others are dead
    pnb = torch.full((b, k), NEG, device=dev)
    real = _real(cols, t)
    digits = torch.arange(blank, device=dev)  # the character classes
    rows = torch.arange(b, device=dev)[:, None]
    cap = None if lengths is None else lengths.to(dev)[:, None, None]
    for i in range(t):
        lp = logp[:, i]  # (B, C)
        tot = torch.logaddexp(pb, pnb)  # (B, K)
        s_b = tot + lp[:, blank, None]
        s_nb = torch.where(last >= 0, pnb + lp.gather(1, last.clamp(min=0)), NEG)
        is_last = digits == last[..., None]  # (B, K, C-1)
        e_nb = torch.where(is_last, pb[..., None], tot[..., None]) + lp[:, None, :blank]
        if cap is not None:
            e_nb = e_nb.masked_fill(n[..., None] >= cap, NEG)
        # Prefix j = prefix k + its last digit: merge that extension into j.
        alive = tot > NEG
        w = int(n.max()) + 1  # only the digits prefixes hold so far are compared
        pos = torch.arange(w, device=dev)
        same = (hist[:, :, None, :w] == hist[:, None, :, :w]) | (pos >= n[:, None, :, None])
        match = same.all(-1) & (n[:, :, None] == n[:, None, :] + 1)  # (B, Kj, Kk)
        match &= alive[:, :, None] & alive[:, None, :]
        via = e_nb.gather(2, last.clamp(min=0)[:, None, :].expand(b, k, k))  # [b, k, j]
        via = torch.where(match, via.transpose(1, 2), NEG)  # (B, Kj, Kk)
        s_nb = torch.logaddexp(s_nb, via.logsumexp(-1))
        taken = (match[..., None] & (last[:, :, None, None] == digits)).any(1)  # (B, Kk, C-1)
        e_nb = e_nb.masked_fill(taken, NEG)
        cand = torch.cat([torch.logaddexp(s_b, s_nb), e_nb.reshape(b, -1)], 1)  # (B, K*C)
        _, idx = cand.topk(k, dim=1)  # (B, K)
        ext = idx >= k
        parent = torch.where(ext, (idx - k) // blank, idx)
        digit = (idx - k) % blank
        new_hist = hist[rows, parent]  # (B, K, T) a copy
        new_n = n[rows, parent]
        at = new_n.clamp(max=t - 1)[..., None]
        new_hist.scatter_(
            2, at, torch.where(ext[..., None], digit[..., None], new_hist.gather(2, at))
        )
        new_pb = torch.where(ext, NEG, s_b.gather(1, parent))
        new_pnb = torch.where(
            ext, e_nb.reshape(b, -1).gather(1, (idx - k).clamp(min=0)), s_nb.gather(1, parent)
        )
        keep = real[:, i, None]
        hist = torch.where(keep[..., None], new_hist, hist)
        n = torch.where(keep, new_n + ext.long(), n)
        last = torch.where(keep, torch.where(ext, digit, last.gather(1, parent)), last)
        pb, pnb = torch.where(keep, new_pb, pb), torch.where(keep, new_pnb, pnb)
    return hist, n, torch.logaddexp(pb, pnb) > NEG


def reading_log_prob(logp, cols, targets, tlen):
    """Exact log P(reading | strip) (B,): the sum over every path (the forward algorithm)."""
    t, blank = logp.shape[1], logp.shape[2] - 1
    return -F.ctc_loss(
        logp.transpose(0, 1),
        targets.clamp(min=0, max=blank - 1),
        cols.clamp(max=t),
        tlen,
        blank=blank,
        reduction="none",
        zero_infinity=False,
    )


def path_weights(logp, path, cols, steps: int) -> torch.Tensor:
    """(B, S, T) weights of a decoded path (see the module docstring)."""
    b, t, c = logp.shape
    blank = c - 1
    real = _real(cols, t)
    _, emit, run = _runs(path, real, blank)
    count = emit.sum(1)
    post = logp.exp()  # (B, T, C)
    on_path = post.gather(2, path[..., None])[..., 0]  # (B, T)
    step = torch.arange(steps, device=logp.device)
    support = (run[:, None, :] == step[None, :, None]).float()  # (B, S, T)
    last_digit = torch.where(run >= 0, torch.arange(t, device=logp.device), -1).max(1).values
    after = real & (torch.arange(t, device=logp.device)[None] > last_digit[:, None])  # (B, T)
    eos_support = torch.where(after.any(1, keepdim=True), after, real).float()
    eos_values = torch.where(after.any(1, keepdim=True), post[..., blank] * after, real.float())
    is_eos = (step[None] == count[:, None]).float()[..., None]  # (B, S, 1)
    values = support * on_path[:, None] + is_eos * eos_values[:, None]
    support = support + is_eos * eos_support[:, None]
    total = values.sum(-1, keepdim=True)
    fallback = support / support.sum(-1, keepdim=True).clamp(min=1)
    return torch.where(total > 0, values / total.clamp(min=1e-30), fallback)


def search(logp, cols, beam: int = 1, lengths=None, charset: str = DIGITS) -> Decoded:
    """Read log posteriors (B, T, C) of strips with ``cols`` (B,) real columns: the best
    path (or the oracle path), then for ``beam`` > 1 the best of it and the prefix beam's.
    C = len(charset) + 1: class i reads ``charset[i]``, the last is the blank."""
    b, t, _ = logp.shape
    real = _real(cols, t)
    logp = logp.masked_fill(~real[..., None], 0.0)
    if lengths is not None:
        path, _ = oracle_path(logp, cols, lengths.to(logp.device).long())
    else:
        path = logp.argmax(-1)  # (B, T) the best path
    texts, count, _ = collapse(path, real, charset)
    first, _ = label_targets(texts, logp.device, charset)
    first = F.pad(first, (0, t - first.shape[1]))  # (B, T) the path's reading
    log_prob = reading_log_prob(logp, cols, first, count)  # all its paths, not just this one
    if beam > 1:
        hist, n, alive = prefix_beam(logp, cols, beam, lengths)
        k = n.shape[1]
        exact = reading_log_prob(
            logp.repeat_interleave(k, 0), cols.repeat_interleave(k), hist.flatten(0, 1), n.flatten()
        ).view(b, k)
        # The path's reading joins the beam, so beam search never ranks below it.
        hist = torch.cat([hist, first[:, None]], 1)  # (B, K+1, T)
        n, exact = torch.cat([n, count[:, None]], 1), torch.cat([exact, log_prob[:, None]], 1)
        k1 = k + 1
        ok = torch.cat([alive, torch.ones_like(alive[:, :1])], 1)
        if lengths is not None:  # only readings of the oracle length (or the path's)
            fallback = torch.arange(k1, device=logp.device) == k1 - 1
            ok &= (n == lengths.to(logp.device)[:, None]) | fallback
        norm = torch.where(ok, exact / (n + 1), NEG)
        pick = norm.argmax(1)  # (B,)
        rows = torch.arange(b, device=logp.device)
        targets, count, log_prob = hist[rows, pick], n[rows, pick], exact[rows, pick]
        # The path's own reading keeps its path (its Viterbi alignment); others are aligned.
        chosen = [
            "".join(charset[i] for i in h[:c])
            for h, c in zip(targets.tolist(), count.tolist(), strict=True)
        ]
        moved = torch.tensor([a != g for a, g in zip(chosen, texts, strict=True)])
        if bool(moved.any()):
            m = moved.to(logp.device)
            path = path.clone()
            path[m], _ = forced_align(logp[m], cols[m], targets[m].clamp(min=0), count[m])
        texts = chosen
    weights = path_weights(logp, path, cols, int(count.max()) + 1)
    return Decoded(texts, log_prob.exp(), weights, cols, log_prob / (count + 1))


def digit_probs_of(logp, cols, texts: list[str], charset: str = DIGITS) -> torch.Tensor:
    """(B, Lmax + 1): for each digit of ``texts``, the highest posterior of that digit over
    its run in the Viterbi alignment of the text; then EOS = the probability that every column
    after the last run is blank (1 when there are none). A text the strip is too short for
    gets 0 throughout (CTC gives it probability 0)."""
    b, t, c = logp.shape
    real = _real(cols, t)
    targets, tlen = label_targets(texts, logp.device, charset)
    path, score = forced_align(logp, cols, targets, tlen)
    _, _, run = _runs(path, real, c - 1)
    post = logp.exp()
    steps = targets.shape[1] if max(map(len, texts), default=0) else 0
    out = torch.zeros(b, steps + 1, device=logp.device)
    for i in range(steps):
        p = post.gather(2, targets[:, i, None, None].expand(b, t, 1))[..., 0]  # (B, T)
        out[:, i] = torch.where(run == i, p, 0.0).max(1).values
    last = torch.where(run >= 0, torch.arange(t, device=logp.device), -1).max(1).values
    after = real & (torch.arange(t, device=logp.device)[None] > last[:, None])
    eos = (logp[..., c - 1] * after).sum(1).exp()
    out[torch.arange(b), tlen] = eos
    return torch.where(score[:, None] > NEG, out, 0.0)
