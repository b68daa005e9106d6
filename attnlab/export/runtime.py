"""The reference loop: read strips with an export (``attnlab export RUN OUT``) on onnxruntime,
with NumPy, Pillow and onnx (to check a graph before it is loaded); no torch, no training code.

    from attnlab.export.runtime import Export
    model = Export("OUT")                      # checks the sidecar and graphs, then loads
    results = model.read(["a.png", "b.png"])  # the preprocessing of `attnlab read`
    results.texts, results.confidence          # beam=K: beam search

A step-wise export is read as ``attnlab.models.stepwise`` reads: the encoder graph gives the
memory and the first state; each step feeds the memory, the state and the previous token
(BOS first) to the step graph and takes the most probable token (PAD and BOS never; EOS
only once a row has had one step per encoder column), until every row has read EOS. The
confidence is the product of the chosen tokens' probabilities. Beam search keeps the K best
prefixes by summed log-probability, ranks finished readings by it over their length
(``decoding.beam_alpha``), and keeps greedy's reading where that scores higher. A CTC export
reads the most probable class at each column, merges repeats and drops blanks; its
confidence sums every alignment of the reading (the forward algorithm).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnlab.data import pixels
from attnlab.errors import UserError
from attnlab.export.sidecar import SIDECAR, graph_bytes, read_meta, require_extra
from attnlab.models.tokens import BOS, EOS, PAD, to_texts, vocab_size

NEG = np.float32(-np.inf)


@dataclass
class Results:
    """Readings of a batch, in its order."""

    texts: list[str]
    confidence: np.ndarray  # (B,) probability of each reading
    score: np.ndarray  # (B,) log-probability over the reading's length (+ EOS)
    columns: np.ndarray  # (B,) real encoder columns
    weights: np.ndarray | None  # (B, S, T) attention weights of each step, 0 after EOS
    logits: np.ndarray | None = None  # (B, S, V) or CTC (B, T, C): greedy's, on request


def load_strips(images, height: int, crop: bool = True) -> list[np.ndarray]:
    """Paths or grey (H, W) arrays in [0, 1] -> strips (height, W'): the preparation of
    ``attnlab read`` (``attnlab.data.pixels``), silent (nothing doubtful is warned)."""
    return [
        pixels.load_image(im, height, crop=crop)
        if isinstance(im, (str, Path))
        else pixels.prepare(np.asarray(im, dtype=np.float32), height, crop=crop)
        for im in images
    ]


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32)
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


class Export:
    """An export folder, checked (``attnlab.export.sidecar``) and loaded on onnxruntime."""

    def __init__(self, folder: Path | str, threads: int | None = None):
        require_extra()
        import onnxruntime as ort

        self.folder = Path(folder)
        self.meta = read_meta(self.folder)
        self.charset, self.height = self.meta["charset"], self.meta["height"]
        self.kind = self.meta["kind"]
        # the class axis of each graph's scores: tokens (PAD, BOS, EOS, the charset), or the
        # charset and the blank
        self.classes = {"logits": vocab_size(self.charset), "log_probs": len(self.charset) + 1}
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
        opts.log_severity_level = 4  # fatal only: a failure is raised, and said in one line
        self.run_options = ort.RunOptions()
        self.run_options.log_severity_level = 4
        self.sessions = {}
        for name, entry in self.meta["graphs"].items():
            data = graph_bytes(self.folder, self.meta, name)
            try:
                self.sessions[name] = ort.InferenceSession(
                    data, opts, providers=["CPUExecutionProvider"]
                )
            except Exception as err:
                first = (str(err).strip().splitlines() or [""])[0][:200]
                raise UserError(f"{self.folder / entry['file']}: onnxruntime: {first}") from err

    def _run(self, name: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One graph run; whatever onnxruntime raises (a graph that does not fit the strips
        or the other graph) is one UserError line, and so is a class axis of another width
        than the sidecar's charset gives."""
        entry = self.meta["graphs"][name]
        where = self.folder / entry["file"]
        try:
            feed = {k: feeds[k] for k in entry["inputs"]}
            got = self.sessions[name].run(entry["outputs"], feed, self.run_options)
        except Exception as err:
            first = (str(err).strip().splitlines() or [""])[0][:200]
            raise UserError(f"{where}: onnxruntime failed while reading: {first}") from err
        out = dict(zip(entry["outputs"], got, strict=True))
        for key, want in self.classes.items():
            if key in out and out[key].shape[-1] != want:
                raise UserError(
                    f"{where}: {key} has {out[key].shape[-1]} classes, the charset of "
                    f"{SIDECAR} ({len(self.charset)} characters) gives {want}: graphs and "
                    "sidecar are not of one export"
                )
        return out

    # -- images ------------------------------------------------------------------------------

    def load(self, images, crop: bool = True) -> list[np.ndarray]:
        """Paths or grey (H, W) arrays in [0, 1] -> strips (height, W'), as `attnlab read`."""
        return load_strips(images, self.height, crop)

    def read(self, images, beam: int = 1, crop: bool = True, batch_size: int = 64) -> Results:
        """Read image files or grey arrays: batches of similar width, results in order."""
        return self.read_strips(self.load(images, crop), beam, batch_size)

    def read_strips(self, strips: list[np.ndarray], beam: int = 1, batch_size: int = 64):
        """Prepared strips (``load``), each (height, W): read in batches of similar width."""
        from attnlab.config.rules import check_beam

        check_beam(beam, "beam")
        order = np.argsort([s.shape[1] for s in strips], kind="stable")
        parts = []
        for start in range(0, len(strips), batch_size):
            idx = order[start : start + batch_size]
            batch, widths = pixels.pad([strips[i] for i in idx])
            parts.append((idx, self.read_batch(batch, widths, beam)))
        return _in_order(parts, len(strips))

    # -- decoding ----------------------------------------------------------------------------

    def read_batch(self, images, widths, beam: int = 1, trace: bool = False) -> Results:
        """images (B, height, W) float32, 1 = paper, padded with paper to at least the widest
        strip; widths (B,) int64. ``trace``: keep greedy's logits (the parity check)."""
        images = np.ascontiguousarray(images, dtype=np.float32)
        widths = np.asarray(widths, dtype=np.int64)
        if images.ndim != 3 or images.shape[1] != self.height or widths.shape != images.shape[:1]:
            raise UserError(
                f"{self.folder}: strips must be (N, {self.height}, W) float32 with widths (N,) "
                f"int64 ({SIDECAR}: pixels), got {images.shape} and {widths.shape}"
            )
        if len(widths) and not ((widths >= 1) & (widths <= images.shape[2])).all():
            raise UserError(
                f"{self.folder}: widths must be 1 to the images' width {images.shape[2]}, got "
                f"{widths.min()} to {widths.max()}"
            )
        if self.kind == "ctc":
            if beam > 1:
                raise UserError(
                    "a CTC export reads greedily (best path); beam search is not "
                    "in its reference loop: use --beam 1"
                )
            return self._ctc(images, widths, trace)
        memory = self._run("encoder", {"images": images, "widths": widths})
        state = memory.pop("state")
        if beam <= 1:
            return self._greedy(memory, state, trace)
        return self._beam(memory, state, beam)

    def _step(self, memory, state, prev):
        out = self._run("step", {**memory, "state": state, "prev": prev})
        return out["logits"], out["next_state"], out.get("weights")

    def _greedy(self, memory, state, trace=False) -> Results:
        columns = memory["mask"].sum(1).astype(np.int64)
        b, limits = len(columns), columns + 1
        prev = np.full(b, BOS, dtype=np.int64)
        done = np.zeros(b, dtype=bool)
        logp_sum = np.zeros(b, dtype=np.float32)
        ids, weights, logits_kept = [], [], []
        for t in range(int(limits.max())):
            logits, state, w = self._step(memory, state, prev)
            logp = constrain(log_softmax(logits), t, limits)
            tok = logp.argmax(-1)
            best = np.take_along_axis(logp, tok[:, None], 1)[:, 0]
            tok = np.where(done, PAD, tok)
            logp_sum += np.where(done, np.float32(0), best)
            ids.append(tok)
            weights.append(w)
            logits_kept.append(logits)
            done |= tok == EOS
            prev = tok
            if done.all():
                break
        ids_t = np.stack(ids, 1)
        w_t = None
        if weights[0] is not None:
            w_t = np.stack(weights, 1).astype(np.float32) * (ids_t != PAD)[..., None]
        steps = np.maximum((ids_t != PAD).sum(1), 1)
        return Results(
            self.texts(ids_t),
            np.exp(logp_sum),
            logp_sum / steps,
            columns,
            w_t,
            np.stack(logits_kept, 1) if trace else None,
        )

    def _beam(self, memory, state, k: int) -> Results:
        alpha = float(self.meta["decoding"]["beam_alpha"])
        columns = memory["mask"].sum(1).astype(np.int64)
        b = len(columns)
        mem = {n: np.repeat(v, k, 0) for n, v in memory.items()}
        limits = np.repeat(columns + 1, k).reshape(b, k)
        st = np.repeat(state, k, 0)
        prev = np.full(b * k, BOS, dtype=np.int64)
        scores = np.full((b, k), NEG, dtype=np.float32)
        scores[:, 0] = 0.0
        done = np.zeros((b, k), dtype=bool)
        length = np.zeros((b, k), dtype=np.float32)
        hist = np.zeros((b, k, 0), dtype=np.int64)
        whist = None
        rows = np.arange(b)[:, None]
        for t in range(int(limits.max())):
            logits, st, w = self._step(mem, st, prev)
            v = logits.shape[-1]
            logp = constrain(log_softmax(logits), t, limits.reshape(-1)).reshape(b, k, v)
            finished = np.full_like(logp, NEG)
            finished[..., PAD] = 0.0
            logp = np.where(done[..., None], finished, logp)
            cand = (scores[..., None] + logp).reshape(b, -1)
            flat = np.argsort(-cand, axis=-1, kind="stable")[:, :k]
            scores = np.take_along_axis(cand, flat, 1)
            beam, tok = flat // v, flat % v
            hist = np.concatenate([hist[rows, beam], tok[..., None]], -1)
            length = length[rows, beam] + (~done[rows, beam]).astype(np.float32)
            done = done[rows, beam] | (tok == EOS)
            st = st[(rows * k + beam).reshape(-1)]
            if w is not None:
                w = w.reshape(b, k, -1)[rows, beam][:, :, None]
                whist = w if whist is None else np.concatenate([whist[rows, beam], w], 2)
            prev = tok.reshape(-1)
            if done.all():
                break
        norm = scores / np.maximum(length, 1) ** alpha
        best = norm.argmax(-1)
        r = np.arange(b)
        ids = hist[r, best]
        weights = None if whist is None else whist[r, best] * (ids != PAD)[..., None]
        found = Results(self.texts(ids), np.exp(scores[r, best]), norm[r, best], columns, weights)
        return _better(found, self._greedy(memory, state))

    def texts(self, ids: np.ndarray) -> list[str]:
        return to_texts(ids, self.charset)

    def _ctc(self, images, widths, trace) -> Results:
        out = self._run("ctc", {"images": images, "widths": widths})
        logp, cols = out["log_probs"], out["columns"].astype(np.int64)
        b, t, c = logp.shape
        real = np.arange(t)[None] < cols[:, None]
        path = np.where(real, logp.argmax(-1), c - 1)
        texts, conf = [], np.zeros(b, dtype=np.float32)
        for i in range(b):
            prev = np.concatenate([[c - 1], path[i, :-1]])
            emit = (path[i] != c - 1) & (path[i] != prev)
            labels = path[i][emit]
            texts.append("".join(self.charset[j] for j in labels))
            conf[i] = ctc_log_prob(logp[i, : cols[i]], labels, c - 1)
        score = conf / np.array([len(x) + 1 for x in texts], dtype=np.float32)
        return Results(texts, np.exp(conf), score, cols, None, logp if trace else None)


def constrain(logp: np.ndarray, t: int, limits: np.ndarray) -> np.ndarray:
    """PAD and BOS never; rows at their step limit may only emit EOS."""
    logp = logp.copy()
    logp[:, [PAD, BOS]] = NEG
    force = t >= limits - 1
    if force.any():
        only = np.full(logp.shape[-1], NEG, dtype=np.float32)
        only[EOS] = 0.0
        logp[force] = only
    return logp


def ctc_log_prob(logp: np.ndarray, labels: np.ndarray, blank: int) -> np.float32:
    """log P(labels | columns) summed over every alignment (the forward algorithm, as torch's
    ``ctc_loss``): logp (T, C) of the real columns. The states are the labels with a blank
    before, between and after them (2L + 1); a path ends in the last label or the last blank.
    No labels: the one path of blanks. No columns: probability 1 of no labels, else 0."""
    ext = np.full(2 * len(labels) + 1, blank, dtype=np.int64)  # (U,)
    ext[1::2] = labels
    u = len(ext)
    if len(logp) == 0:
        return np.float32(0.0 if u == 1 else -np.inf)
    skip = np.zeros(u, dtype=bool)  # state s may be entered from s - 2
    skip[2:] = (ext[2:] != blank) & (ext[2:] != ext[:-2])
    alpha = np.full(u, -np.inf)  # (U,)
    alpha[: min(2, u)] = logp[0, ext[: min(2, u)]]
    for i in range(1, len(logp)):
        one = np.concatenate([[-np.inf], alpha[:-1]])  # (U,) from s - 1
        two = np.where(skip, np.concatenate([[-np.inf, -np.inf], alpha[:-2]])[:u], -np.inf)
        alpha = np.logaddexp(np.logaddexp(alpha, one), two) + logp[i, ext]
    return np.float32(np.logaddexp(alpha[-1], alpha[-2]) if u > 1 else alpha[-1])


def _better(a: Results, b: Results) -> Results:
    """Row by row, the reading of ``a`` or ``b`` that scores higher (``a`` on ties)."""
    take = b.score > a.score
    weights = None
    if a.weights is not None and b.weights is not None:
        s = max(a.weights.shape[1], b.weights.shape[1])
        wa, wb = (np.pad(w, ((0, 0), (0, s - w.shape[1]), (0, 0))) for w in (a.weights, b.weights))
        weights = np.where(take[:, None, None], wb, wa)
    return Results(
        [tb if x else ta for ta, tb, x in zip(a.texts, b.texts, take.tolist(), strict=True)],
        np.where(take, b.confidence, a.confidence),
        np.where(take, b.score, a.score),
        a.columns,
        weights,
    )


def _in_order(parts: list[tuple[np.ndarray, Results]], n: int) -> Results:
    """Batches read in width order -> one Results in the images' order (weights per strip
    cropped to its steps and columns, padded to the widest)."""
    texts, conf, score, cols = [""] * n, np.zeros(n), np.zeros(n), np.zeros(n, dtype=np.int64)
    rows: list[np.ndarray | None] = [None] * n
    for idx, r in parts:
        for j, i in enumerate(idx.tolist()):
            texts[i], conf[i], score[i], cols[i] = (
                r.texts[j],
                r.confidence[j],
                r.score[j],
                r.columns[j],
            )
            if r.weights is not None:
                rows[i] = r.weights[j, : len(r.texts[j]) + 1, : r.columns[j]]
    weights = None
    if all(w is not None for w in rows):
        s, t = max(w.shape[0] for w in rows), max(w.shape[1] for w in rows)
        weights = np.zeros((n, s, t), dtype=np.float32)
        for i, w in enumerate(rows):
            weights[i, : w.shape[0], : w.shape[1]] = w
    return Results(texts, conf, score, cols, weights)
