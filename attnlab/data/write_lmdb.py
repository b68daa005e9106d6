"""Strips written to disk as an LMDB the loaders read back (``attnlab data export
--format lmdb``; ``attnlab.data.sources`` reads it): the layout of
deep-text-recognition-benchmark and strhub (``num-samples``, ``image-%09d`` PNG records,
``label-%09d``, and ``group-%09d`` when the groups are known)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attnlab.data.strips import StripBatch


def export_lmdb(batch: StripBatch, out: Path | str, groups: list[str] | None = None) -> Path:
    """Strips as PNG records in an LMDB of the strhub/DTRB layout, written under a temporary
    name and renamed into place (a folder written whole or not at all); ``groups``, when
    known, as ``group-%09d`` records."""
    import io

    import lmdb
    from PIL import Image

    from attnlab.io.folders import atomic_dir

    def write(work: Path) -> None:
        work.mkdir(parents=True, exist_ok=True)
        size = max(1 << 20, 4 * int(batch.images.numel()) + 4096 * len(batch))
        env = lmdb.open(str(work), map_size=size, subdir=True)
        with env.begin(write=True) as txn:
            for i, label in enumerate(batch.labels, start=1):
                pixels = batch.images[i - 1, :, : int(batch.widths[i - 1])].numpy()
                buf = io.BytesIO()
                Image.fromarray(np.round(pixels * 255).astype(np.uint8), mode="L").save(buf, "PNG")
                txn.put(f"image-{i:09d}".encode(), buf.getvalue())
                txn.put(f"label-{i:09d}".encode(), label.encode())
                if groups is not None:
                    txn.put(f"group-{i:09d}".encode(), groups[i - 1].encode())
            txn.put(b"num-samples", str(len(batch)).encode())
        env.sync()
        env.close()
        lock = work / "lock.mdb"
        if lock.exists():
            lock.unlink()

    return atomic_dir(Path(out), write)
