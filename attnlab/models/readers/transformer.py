"""The transformer reader: a pre-norm transformer decoder over the columns of the strip.

Each output step attends to the digits read so far (masked self-attention) and to the
columns (cross-attention with the padding mask). The columns are the shared BiGRU's states,
or (``columns: transformer``) a small transformer encoder over the column features, so
"BiGRU columns vs transformer columns" is one override (``model.columns``; older configs and
checkpoints call it ``model.encoder``, read as ``columns``: ``RENAMED``). The positional
representation of both stacks is a config value (``pos``; ``dec_pos`` / ``enc_pos``
override one).

Teacher forcing runs every output position in one call under a causal mask. Decoding
keeps each layer's self-attention keys and values in the decoder state, a tensor
(B, L, 2, h, steps so far, dh): beam search reorders state rows, so the cache follows its
beams with nothing extra, and each step computes one position.

The reader's weights are the cross-attention weights of one layer (``attn_layer``, the
last by default), averaged over heads or of one head (``attn_head``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar

import torch
from torch import nn

from attnlab.config import rules
from attnlab.models import costs, tokens
from attnlab.models.decoder_memory import Memory
from attnlab.models.readers.transformer_layers import Decoder, Encoder
from attnlab.models.readers.transformer_positions import Pos, Positions
from attnlab.models.registry import register
from attnlab.models.stepwise import StepwiseConfig, StepwiseReader


class Columns(str, Enum):
    gru = "gru"  # the shared BiGRU's column states
    transformer = "transformer"  # a pre-norm transformer encoder over the column features


@dataclass
class TransformerConfig(StepwiseConfig):
    dec_hidden: int = 64  # the width (d_model) of the decoder and the column encoder
    embed: int = 64  # token embedding; projected to dec_hidden when the two differ
    heads: int = 4  # attention heads (must divide dec_hidden)
    dec_layers: int = 2
    columns: Columns = Columns.gru  # columns from the BiGRU, or from a transformer encoder
    enc_layers: int = 2  # layers of the transformer column encoder (columns=transformer)
    mlp_hidden: int = 128  # hidden units of the position-wise MLP of every layer
    dropout: float = 0.0  # every training strip is fresh: there is little to overfit
    # Positions: sinusoidal | learned | relative (T5-style bucketed bias) | rotary | none.
    # `pos` sets both stacks; dec_pos / enc_pos (null = follow pos) override one. The BiGRU
    # orders its columns itself: enc_pos applies to the transformer column encoder only.
    pos: Pos = Pos.sinusoidal
    dec_pos: Pos | None = None  # the decoder's own (null = follow pos)
    enc_pos: Pos | None = None  # the transformer column encoder's own (null = follow pos)
    max_len: int = 128  # positions in a learned table (output steps; columns)
    rel_buckets: int = 32  # relative: buckets of key-query offsets (T5)
    rel_max_distance: int = 128  # relative: offsets beyond this share the last bucket
    attn_layer: int = -1  # the decoder layer whose cross-attention weights are returned
    attn_head: int | None = None  # None = mean over heads, else that head's weights
    cache: bool = True  # keys/values cached while decoding; false recomputes every prefix
    # Keys this config had under another name, read as today's in older runs' configs and
    # checkpoints (attnlab.models.registry.renamed): `encoder` read beside the config group
    # `encoder=` (the shared column encoder) as if it chose that.
    RENAMED: ClassVar[dict[str, str]] = {"encoder": "columns"}

    @classmethod
    def check(cls, cfg: Any, height: int) -> None:
        """Values a type cannot rule out; a UserError naming the key, before anything is
        built or written."""
        super().check(cfg, height)

        def require(ok: bool, key: str, rule: str) -> None:
            rules.require(ok, f"model.{key}", getattr(cfg, key), rule)

        for key in ("heads", "dec_layers", "mlp_hidden", "max_len"):
            require(getattr(cfg, key) >= 1, key, "must be >= 1")
        require(
            cfg.dec_hidden % cfg.heads == 0,
            "heads",
            f"must divide model.dec_hidden={cfg.dec_hidden}",
        )
        dh = cfg.dec_hidden // cfg.heads
        rotary = Pos.rotary in (cfg.dec_pos or cfg.pos, cfg.enc_pos or cfg.pos)
        require(not rotary or dh % 2 == 0, "heads", f"rotary needs an even head width, got {dh}")
        if Columns(cfg.columns) is Columns.transformer:
            require(
                cfg.enc_layers >= 1, "enc_layers", "must be >= 1 with model.columns=transformer"
            )
        require(0.0 <= cfg.dropout < 1.0, "dropout", "must be in [0, 1)")
        require(cfg.rel_buckets >= 4, "rel_buckets", "must be >= 4")
        require(
            cfg.rel_max_distance > cfg.rel_buckets // 2,
            "rel_max_distance",
            "must be > rel_buckets / 2",
        )
        layers = cfg.dec_layers
        require(
            -layers <= cfg.attn_layer < layers, "attn_layer", f"must index one of {layers} layers"
        )
        ok_head = cfg.attn_head is None or 0 <= cfg.attn_head < cfg.heads
        require(ok_head, "attn_head", f"must be null (mean) or a head 0..{cfg.heads - 1}")


@dataclass
class TransformerMemory(Memory):
    kv: torch.Tensor  # (B, L, 2, h, T, dh) every decoder layer's cross-attention keys, values


@register(
    "transformer",
    TransformerConfig,
    "transformer reader: masked self-attention over the digits, cross-attention over columns",
)
class TransformerReader(StepwiseReader):
    # the column features, their projection and the transformer over the columns encode;
    # the token embedding and the transformer decoder decode
    PARTS = {
        "encoder": ("encoder", "columns", "column_encoder"),
        "decoder": ("embed", "embed_proj", "decoder"),
        "output": ("out", "ctc_head"),
    }
    ONNX_REFUSED = (
        "its decoder state is a key/value cache that grows by one position per step and its "
        "positions are counted in Python, which one traced step graph cannot hold"
    )

    def too_long(self, label, columns):
        steps = self.learned_steps
        if steps is not None and len(label) + 1 > steps:  # a learned position per step
            return f"{len(label) + 1} steps, the learned table holds model.max_len={steps}"
        return super().too_long(label, columns)

    def __init__(self, cfg: TransformerConfig, height: int):
        transformer_columns = Columns(cfg.columns) is Columns.transformer
        super().__init__(cfg, height, recurrent=not transformer_columns, memory_size=cfg.dec_hidden)
        d = cfg.dec_hidden
        del self.init  # a transformer decoder starts from BOS alone, not from a summary
        self.out = nn.Linear(d, self.vocab)  # after the decoder's final LayerNorm
        learned = Pos(cfg.dec_pos or cfg.pos) is Pos.learned
        self.learned_steps = cfg.max_len if learned else None
        self.embed_proj = nn.Identity() if cfg.embed == d else nn.Linear(cfg.embed, d, bias=False)
        self.columns = nn.Linear(self.encoder.state_size, d)  # (B, T, 2H) -> (B, T, D)
        rel = (cfg.rel_buckets, cfg.rel_max_distance)
        enc_pos = Positions(
            (cfg.enc_pos or cfg.pos) if transformer_columns else Pos.none,
            d,
            cfg.heads,
            cfg.max_len,
            *rel,
            bidirectional=True,
            key="model.enc_pos" if cfg.enc_pos else "model.pos",
        )
        dec_pos = Positions(
            cfg.dec_pos or cfg.pos,
            d,
            cfg.heads,
            cfg.max_len,
            *rel,
            bidirectional=False,
            key="model.dec_pos" if cfg.dec_pos else "model.pos",
        )
        enc_layers = cfg.enc_layers if transformer_columns else 0  # BiGRU: final LayerNorm only
        self.column_encoder = Encoder(
            d, cfg.heads, enc_layers, cfg.mlp_hidden, cfg.dropout, enc_pos
        )
        self.decoder = Decoder(
            d,
            cfg.heads,
            cfg.dec_layers,
            cfg.mlp_hidden,
            cfg.dropout,
            dec_pos,
            cfg.attn_layer,
            cfg.attn_head,
        )
        self.cache = cfg.cache

    def flop_terms(self, columns, steps):
        """The decoder's layers by module; self-attention pairs steps with steps, the
        cross-attention steps with columns. None with a transformer column encoder."""
        if len(self.column_encoder.layers):
            return None
        d, t, s, lin = self.columns.out_features, columns, steps, costs.linear
        n = lin(t, self.columns.in_features, d)
        terms = [
            *self.shared_terms(columns, steps),
            costs.Term("column projection", "encoder", "columns", "column", n),
        ]
        if isinstance(self.embed_proj, nn.Linear):
            n = lin(s, self.embed_proj.in_features, d)
            terms.append(costs.Term("embedding projection", "decoder", "embed_proj", "step", n))
        for i, layer in enumerate(self.decoder.layers):
            m = layer.mlp
            for name, module, growth, n in [
                ("self q, k, v", "self_attn.qkv", "step", lin(s, d, 3 * d)),
                ("self scores and sums", "self_attn", "pair", 2 * lin(s * s, d, 1)),
                ("self output", "self_attn.proj", "step", lin(s, d, d)),
                ("cross query", "cross.query", "step", lin(s, d, d)),
                ("cross k, v", "cross.kv", "column", lin(t, d, 2 * d)),
                ("cross scores and sums", "cross", "pair", 2 * lin(s * t, d, 1)),
                ("cross output", "cross.proj", "step", lin(s, d, d)),
                ("MLP", "mlp", "step", lin(s, d, m[0].out_features) + lin(s, m[2].in_features, d)),
            ]:
                path = f"decoder.layers.{i}.{module}"
                terms.append(costs.Term(f"layer {i + 1} {name}", "decoder", path, growth, n))
        return terms

    def encode(self, images, widths) -> TransformerMemory:
        # BiGRU states, or the column features themselves under columns=transformer.
        if self.encoder.gru is None:
            states, lengths = self.encoder.features(images, widths)  # (B, T, 2H), (B,)
        else:
            states, lengths, _ = self.encoder(images, widths)
        cols = torch.arange(states.shape[1], device=states.device)
        mask = cols[None, :] < lengths[:, None]  # (B, T) padding mask
        x = self.column_encoder(self.columns(states), mask)  # (B, T, D)
        real = mask[..., None].to(x.dtype)
        summary = (x * real).sum(1) / real.sum(1)  # (B, D) mean of the real columns
        return TransformerMemory(x, mask, summary, self.decoder.keys_values(x))

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embed_proj(self.embed(ids))  # (B, S) -> (B, S, D)

    def init_state(self, memory: TransformerMemory) -> torch.Tensor:
        b = memory.mask.shape[0]
        if self.cache:
            return self.decoder.empty_cache(b, memory.kv)  # (B, L, 2, h, 0, dh)
        return torch.zeros(b, 0, dtype=torch.long, device=memory.mask.device)  # tokens so far

    def step(self, memory: TransformerMemory, state: torch.Tensor, prev: torch.Tensor):
        """prev (B,) -> logits (B, V), state, weights (B, T). The state is the cache
        (B, L, 2, h, t, dh) at step t; with ``cache`` off, the tokens fed so far (B, t),
        and the whole prefix is run again (the reference the cache is tested against)."""
        if not self.cache:
            prefix = torch.cat([state, prev[:, None]], 1)  # (B, t+1)
            logits, weights = self.teacher_forcing(memory, prefix)
            return logits[:, -1], prefix, weights[:, -1]
        y, weights, state = self.decoder(self._embed(prev[:, None]), memory.kv, memory.mask, state)
        return self.out(y[:, 0]), state, weights[:, 0]

    def head_weights(self, images, widths, texts):
        """Every decoder layer's and head's cross-attention (B, S, T), one call: the causal
        mask makes these the weights free decoding had at each step of the same reading."""
        inputs, _ = tokens.encode(texts, self.charset)
        memory = self.encode(images, widths)
        _, weights, _ = self.decoder(
            self._embed(inputs.to(images.device)), memory.kv, memory.mask, every_head=True
        )  # (B, L, h, S, T)
        _, layers, heads = weights.shape[:3]
        return {
            f"layer {i + 1} head {j + 1}": weights[:, i, j]
            for i in range(layers)
            for j in range(heads)
        }

    def teacher_forcing(self, memory: TransformerMemory, inputs: torch.Tensor):
        """inputs (B, S) -> logits (B, S, V), weights (B, S, T): one call, causal mask."""
        y, weights, _ = self.decoder(self._embed(inputs), memory.kv, memory.mask)
        return self.out(y), weights
