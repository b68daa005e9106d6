"""``attnlab train init_from=RUN_OR_CHECKPOINT``: start from a trained reader's weights.

Every tensor of the new reader that the source checkpoint holds with the same name and
shape is copied; the others keep their fresh initialisation and are listed in one line.
The tensors tied to the vocabulary (each reader's output layer, token embedding, CTC
head: found by building the reader for one character more) are compared by charset, not by
shape: their rows are mapped by character, the special tokens' rows (PAD, BOS, EOS; the
CTC blank) kept, and the rows of characters the source never read re-initialised and
listed. The encoder must fit as it is: a config that differs from the source run's in the
encoder's shape is refused in one line naming the key. The checkpoint is read with
``weights_only=True`` and non-finite weights refused (``attnlab.runs.checkpoint.load``).

Fine-tuning must not leak: a held-out set (``data.val_share`` of ``data.path``, or
``data.val_path``) that holds strips the starting weights were trained on, or with groups
a group they were trained on, would score recall as reading. The source checkpoint records
what it trained on (``data_split``: the trained strips' image keys and groups), and such a
held-out set is refused in one line naming how many strips (and groups) are involved.
Strips are compared by content (``attnlab.data.dedup.content_key``), so reading them
another way (``data.crop``, inversion) hides none; a record of an older attnlab, whose keys
are of its strips as read, is compared with the held-out strips' keys read that way.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from attnlab.config.model import backbone_of
from attnlab.data.dedup import CONTENT, keyed_by
from attnlab.data.lineage import carried, trained_in
from attnlab.data.sources import nfc
from attnlab.errors import UserError
from attnlab.models import encoders, registry
from attnlab.models.tokens import DIGIT0
from attnlab.runs import checkpoint, locate

log = logging.getLogger("attnlab.train")


def encoder_keys(model: Any) -> tuple[str, ...]:
    """The keys that shape the encoder ``model.backbone`` names, which fine-tuning keeps as
    the source's: its own and those every encoder reads (its module's, via the registry)."""
    return ("backbone", *encoders.get(backbone_of(model)).rules.shape_keys)


def init_from(
    model: torch.nn.Module, cfg: Any, source: str, split: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Load what fits of ``source`` (a run directory: its best.pt, or a checkpoint file)
    into ``model``; returns the record the run keeps (path, step, what was re-initialised).
    ``split``: the new run's data record (data=folder), checked against what the source
    trained on (``check_leak``)."""
    path = locate.resolve(source, "best", int(cfg.data.height))  # pretrained: by height
    ckpt = checkpoint.load(path)
    before = ckpt.run_config()
    what = f"init_from={source}"
    ancestors = list((ckpt.init_from or {}).get("trained_on") or [])
    check_leak(ckpt.data_split, split, what, ancestors, int(cfg.data.height))
    _check_reader(before, cfg, what)
    _check_encoder(before, cfg, what)
    saved: dict[str, torch.Tensor] = ckpt.model
    own = model.state_dict()
    for key, value in own.items():  # a reader whose encoder is built another way
        if key.startswith("encoder.") and (key not in saved or saved[key].shape != value.shape):
            raise UserError(f"{what}: the source's encoder has no tensor {key} of this shape")
    old_chars, new_chars = str(before.data.charset), str(cfg.data.charset)
    tied = vocab_dims(cfg.model, int(cfg.data.height), new_chars)
    _check_shapes(before, cfg, what, saved, own, tied)
    fits = {
        k: v for k, v in saved.items() if k in own and k not in tied and v.shape == own[k].shape
    }
    for key, dim in tied.items():
        if key in saved and _same_but(saved[key].shape, own[key].shape, dim):
            fits[key] = map_rows(saved[key], own[key], dim, old_chars, new_chars)
    fresh = [k for k in own if k not in fits]
    model.load_state_dict({**own, **fits})
    layers = sorted({k.rsplit(".", 1)[0] for k in fresh})
    new = "".join(c for c in new_chars if c not in old_chars)
    mapped = sorted(k for k in tied if k in fits)
    log.info(
        "initialised from %s (its %s reader, step %s): %d of %d tensors; rows mapped by "
        "character in %s; new characters (rows re-initialised): %s; re-initialised: %s",
        path,
        ckpt.reader,
        ckpt.step,
        len(fits),
        len(own),
        ", ".join(mapped) or "none",
        repr(new) if new else "none",
        ", ".join(layers) if layers else "none",
    )
    return {
        "path": str(path.resolve()),
        "reader": ckpt.reader,
        "step": int(ckpt.step),
        "charset": old_chars,
        "reinitialised": fresh,
        "mapped_by_character": mapped,
        "new_characters": new,
        # what the weights were trained on, the source's own strips and every earlier run's
        "trained_on": carried(ckpt.data_split, ckpt.init_from, str(path.resolve())),
    }


def check_leak(
    trained: dict[str, Any] | None,
    split: dict[str, Any] | None,
    what: str,
    ancestors: list[dict[str, Any]] | None = None,
    height: int | None = None,
) -> None:
    """Refuse a held-out set (``split``, the new run's record) that holds strips, by image,
    or groups, by name, that the source (``trained``, its record) or any run it was
    fine-tuned from (``ancestors``: ``attnlab.data.lineage``) trained on. A source trained on
    synthetic strips has no record of its own: nothing of a folder was trained on by it.
    ``height``: the run's data.height, at which a record of an older attnlab is compared."""
    records = ([{"checkpoint": "the source checkpoint", **trained}] if trained else []) + list(
        ancestors or []
    )
    if not records or not split:
        return
    held = split.get("held_out_keys") or []
    held_groups = {nfc(g) for g in split.get("held_out_groups") or split.get("val_groups") or []}
    leaked_strips: set[int] = set()
    groups: set[str] = set()
    first = None
    as_read: list[list[set[str]]] = []  # the held-out strips' keys as read, once needed
    for record in records:
        strips = _leaked_strips(record, split, held, lambda: _as_read(as_read, split, height))
        shared = {nfc(g) for g in record.get("trained_groups") or []} & held_groups
        if (strips or shared) and first is None:
            first = record
        leaked_strips |= strips
        groups |= shared
    if first is None:
        return
    by = first["checkpoint"]
    if by != "the source checkpoint":
        by = f"{by}, a checkpoint the source was fine-tuned from"
    if groups:
        also = (
            f", as were {len(leaked_strips)} of its {len(held)} held-out strips"
            if leaked_strips
            else f", through other strips of theirs (none of its {len(held)} held-out strips)"
        )
        whom = (
            f"{len(groups)} of this run's {len(held_groups)} held-out groups (first "
            f"{min(groups)!r}) {_were(len(groups))} trained on by {by}{also}"
        )
    else:
        whom = f"{len(leaked_strips)} of this run's {len(held)} held-out strips"
        whom += f" {_were(len(leaked_strips))} trained on by {by}"
    raise UserError(
        f"{what}: {whom}; hold out what it held out (its data.val_share and data.eval_seed), "
        f"give a data.val_path it never read, or start elsewhere"
    )


def _were(n: int) -> str:
    return "was" if n == 1 else "were"


def _as_read(memo: list, split: dict[str, Any], height: int | None) -> list[set[str]]:
    """The held-out strips' keys as an older attnlab recorded them, read once (none
    without ``height``)."""
    if not memo:
        from attnlab.data.recorded import held_out_read_keys

        held = split.get("held_out_keys") or []
        memo.append(held_out_read_keys(split, height) if height else [set() for _ in held])
    return memo[0]


def _leaked_strips(
    record: dict[str, Any], split: dict[str, Any], held: list[str], as_read
) -> set[int]:
    """The positions of the held-out strips that one training record trained on: by content
    key, by key as read for a record of an older version (``as_read()``: per held-out strip),
    or for a record of a version without keys by id, when the source is the same."""
    if "trained_keys" in record:
        seen = set(trained_in(record))  # data.unlabelled's strips count as trained on
        if keyed_by(record) != CONTENT:
            return {i for i, keys in enumerate(as_read()) if keys & seen}
        return {i for i, k in enumerate(held) if k in seen}
    same = record.get("path") == split.get("path") and not split.get("val_path")
    if not same:
        return set()
    kept = set(record.get("held_out", [])) | set(record.get("held_out_copies", []))
    return {i for i, s in enumerate(split.get("held_out", [])) if s not in kept}


KEEPS = "init_from keeps the source's reader, encoder, height and charset"


def _check_reader(before: Any, cfg: Any, what: str) -> None:
    """Another reader than the source's cannot take its weights (attnlab.tasks.recipe gives
    a command without model= the source's own)."""
    if str(cfg.model.name) != str(before.model.name):
        raise UserError(
            f"{what}: model={cfg.model.name} but the source is {_a(before.model.name)} reader: "
            f"its weights cannot start another reader (leave model= out: {KEEPS})"
        )


def _check_shapes(before, cfg, what, saved, own, tied) -> None:
    """Every tensor both readers hold (other than the vocabulary's rows) has the source's
    shape; the first that does not is refused, naming the keys that differ from the
    source's (the user's: the rest are the source's, attnlab.tasks.recipe)."""
    for key, value in own.items():
        if key in saved and key not in tied and saved[key].shape != value.shape:
            keys = [
                f"model.{k}={_plain(cfg.model.get(k))}"
                for k in before.model
                if _plain(before.model.get(k)) != _plain(cfg.model.get(k))
            ]
            raise UserError(
                f"{what}: {', '.join(keys) or 'this config'} cannot fit the source's weights "
                f"({key} is {tuple(saved[key].shape)} there, {tuple(value.shape)} here); "
                f"leave {'them' if len(keys) > 1 else 'it'} out: {KEEPS}"
            )


def _plain(value: Any) -> Any:
    return list(value) if hasattr(value, "__len__") and not isinstance(value, str) else value


def _a(word: Any) -> str:
    return f"{'an' if str(word)[:1].lower() in 'aeiou' else 'a'} {word}"


def _check_encoder(before: Any, cfg: Any, what: str) -> None:
    if int(before.data.height) != int(cfg.data.height):
        raise UserError(
            f"{what}: data.height={cfg.data.height} but the source run's is "
            f"{before.data.height}: the encoder's shape must be the source's"
        )
    for key in encoder_keys(cfg.model):
        old, new = before.model.get(key), cfg.model.get(key)
        if key == "backbone":
            old, new = backbone_of(before.model), backbone_of(cfg.model)
        old = list(old) if hasattr(old, "__len__") else old
        new = list(new) if hasattr(new, "__len__") else new
        if old != new:
            raise UserError(
                f"{what}: model.{key}={new} but the source run's is {old}: the encoder's "
                f"shape must be the source's (leave model.{key} out: {KEEPS})"
            )


def vocab_dims(model_cfg: Any, height: int, charset: str) -> dict[str, int]:
    """Each tensor tied to the vocabulary, with the dimension it is sized by: the ones that
    grow when the reader is built (on the meta device) for one character more."""
    extra = next(c for c in "\ue000\ue001" if c not in charset)  # private use: in no font
    with torch.random.fork_rng(devices=[]):
        now = registry.build_shapes(model_cfg, height, charset).state_dict()
        more = registry.build_shapes(model_cfg, height, charset + extra).state_dict()
    out = {}
    for key, value in now.items():
        grown = [
            i for i, (a, b) in enumerate(zip(value.shape, more[key].shape, strict=True)) if a != b
        ]
        if grown:
            out[key] = grown[0]
    return out


def _same_but(a: torch.Size, b: torch.Size, dim: int) -> bool:
    return len(a) == len(b) and all(
        x == y for i, (x, y) in enumerate(zip(a, b, strict=True)) if i != dim
    )


def _rows(charset: str, size: int) -> dict[Any, int]:
    """The row of each character and special token in a vocabulary of ``size`` rows: the
    step-wise readers' PAD, BOS, EOS first (attnlab.models.tokens), the CTC blank last."""
    extra = size - len(charset)
    lead = DIGIT0 if extra == DIGIT0 else 0
    rows: dict[Any, int] = {("special", i): i for i in range(lead)}
    rows.update({c: lead + i for i, c in enumerate(charset)})
    rows.update({("tail", j): lead + len(charset) + j for j in range(extra - lead)})
    return rows


def map_rows(
    src: torch.Tensor, fresh: torch.Tensor, dim: int, old_chars: str, new_chars: str
) -> torch.Tensor:
    """``fresh`` with the source's rows (along ``dim``) of every character and special token
    both vocabularies hold; the rows of new characters stay as initialised."""
    out = fresh.clone()
    old = _rows(old_chars, src.shape[dim])
    for key, row in _rows(new_chars, fresh.shape[dim]).items():
        if key in old:
            out.select(dim, row).copy_(src.select(dim, old[key]))
    return out
