"""``data``: how strips are drawn (the generator) or read (data=folder), and the charset."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from attnlab.config.rules import check_pairs, finite, require, span

# data.augment's operations for real images (attnlab.data.photo), in the order applied.
AUGMENT_NAMES = ("affine", "perspective", "erode", "dilate", "contrast", "blur", "noise")


@dataclass
class DataConfig:
    """Synthetic strips. Ranges are ``[low, high]``; lengths are inclusive."""

    height: int = 32
    # Seen lengths: the inclusive range train_lengths=[lo, hi], unless train_length_set is given.
    train_lengths: list[int] = field(default_factory=lambda: [1, 8])
    train_length_set: list[int] | None = None
    # true: every training batch holds strips of one seen length, drawn in proportion to its
    # tokens (digits + EOS), the expected gradient of mixed batches; no padding at all, so
    # 1.1x (2 threads) to 1.2x (1 thread) the strips/s of packed mixed batches. Opt-in: for
    # the same training time the attention reader reads 0-1.3 points worse, the fixed-context
    # reader ~4 (closing note, #11). false: lengths drawn uniformly for each strip of a batch.
    batch_by_length: bool = False
    # Fonts shipped in Python packages: "bundled" = Pillow's font + matplotlib's TrueType
    # fonts, "reportlab" = ReportLab's Arial, Times New Roman and Courier, and the font
    # packages' typefaces by package name (attnlab.data.fonts.FONT_SETS); other entries
    # are paths or globs (system fonts).
    fonts: list[str] = field(
        default_factory=lambda: [
            "bundled",
            "reportlab",
            "pymupdf-fonts",
            "font-lato",
            "font-source-serif-pro",
        ]
    )
    exclude_fonts: list[str] = field(default_factory=list)  # file-name substrings left out
    font_sizes: list[int] = field(default_factory=lambda: [22, 26, 30])  # px at height 32
    stroke_widths: list[int] = field(default_factory=lambda: [0, 1])
    marked_zeros: float = 0.3  # share of renderings whose zero has a dot or a slash (monospace)
    oldstyle: float = 0.15  # share of renderings drawn with old-style (text) figures
    footless_ones: float = 0.3  # share of renderings whose 1 loses its foot (Arial's 1)
    variants: int = 8  # geometric variants per glyph (scale, stretch, shear, rotation)
    scale: list[float] = field(default_factory=lambda: [0.85, 1.1])
    stretch: list[float] = field(default_factory=lambda: [0.8, 1.25])  # glyph width x, on scale
    shear: list[float] = field(default_factory=lambda: [-0.25, 0.25])
    rotation: list[float] = field(default_factory=lambda: [-4.0, 4.0])  # degrees
    # Max displacement (px) of a smooth warp bending strokes (elastic); 0 = none. Synthetic
    # strips: each glyph variant's, in the bank. Real strips (data=folder): each augmented
    # strip's, in both directions (attnlab.data.augment.warp). Opt-in for synthetic strips:
    # 1 px changed no left-out family beyond run-to-run variation (closing note, #11).
    elastic: float = 0.0
    # Real strips (data=folder) only: max slant of an augmented strip as a whole (px of
    # horizontal shift per row from the middle row; attnlab.data.augment.slant); 0 = none.
    slant: float = 0.0
    # Real strips (data=folder) only: augmentation for real images, by name (affine,
    # perspective, erode, dilate, contrast, blur, noise; attnlab.data.photo); [] = none.
    augment: list[str] = field(default_factory=list)
    v_offset: int = 2  # max vertical shift of a glyph, px
    gap: list[int] = field(default_factory=lambda: [-1, 4])  # px between glyphs (<0 overlaps)
    margin: list[int] = field(default_factory=lambda: [2, 8])  # px left and right
    noise: list[float] = field(default_factory=lambda: [0.0, 0.06])  # std of pixel noise
    blur: list[float] = field(default_factory=lambda: [0.0, 0.8])  # Gaussian sigma, px
    contrast: list[float] = field(default_factory=lambda: [0.6, 1.0])
    background: list[float] = field(default_factory=lambda: [0.8, 1.0])
    # Training augmentation: whole-strip variation after the glyphs are placed, for the
    # training stream only (validation, test and probe sets and exports are the generator's
    # strips without it, so runs trained with other augmentation are read on the same sets).
    # Geometry is vertical only, so every glyph keeps its columns and its span stays true.
    augmented: float = 0.5  # share of training strips that get the variation below
    dilate: float = 0.2  # share of strips whose ink is thickened by one pixel (morphology)
    ink_level: list[float] = field(default_factory=lambda: [-0.4, 0.3])  # <0 thins, >0 bolds
    strip_scale: list[float] = field(default_factory=lambda: [0.85, 1.15])  # vertical, whole
    strip_shift: float = 2.0  # max vertical shift of the whole string, px
    wave: float = 1.0  # max amplitude of a smooth vertical wave along the strip (elastic), px
    resample: list[float] = field(default_factory=lambda: [0.5, 1.0])  # down, then back up
    shading: float = 0.15  # max darkening of the paper across the strip (a linear ramp)
    jpeg: float = 0.0  # share of those strips JPEG-compressed (block DCT, standard table)
    jpeg_quality: list[float] = field(default_factory=lambda: [15.0, 75.0])  # JPEG quality
    # Share of synthetic training strips drawn with captcha-like clutter (attnlab.data.clutter):
    # glyphs rotated, slanted, scaled, bent (elastic), thickened and overlapping one by one;
    # grey paper with a gradient and blotches, noise curves and dots; perspective, blur,
    # noise and JPEG damage. The synthetic stream's strips and data=folder's data.mix ones;
    # validation and test sets never. 0 = none (nothing drawn: the stream as it was).
    clutter: float = 0.0
    val_per_length: int = 200  # strips per seen length in the fixed validation sets
    eval_seed: int = 20_240_808  # fixed evaluation sets derive their seeds from this
    # --- labelled strips (data=folder; attnlab.data.sources, attnlab.data.source_train) ---
    source: str = "synthetic"  # synthetic | folder (data=folder sets it)
    # data=folder: a folder with labels.csv, a list file (path<TAB>label) or an LMDB
    # (num-samples, image-%09d, label-%09d). Strips of the seen lengths train the reader.
    path: str | None = None
    val_path: str | None = None  # validation and test strips; None = a share of data.path
    val_share: float = 0.1  # of data.path, held out (seeded by eval_seed), never trained on
    mix: float = 0.0  # share of synthetic strips in each training batch (data=folder)
    crop: bool = True  # ink placed as the generator places it, as eval.crop does
    skip_long: bool = False  # labels too long for the reader: skipped (counted), not refused
    # data=folder: train on the first N strips of one fixed order of the training pool (drawn
    # from the run's seed, lengths taken in turn; attnlab.data.limit), so a smaller N's strips
    # are inside a larger N's. The held-out share is drawn before, the same for every N.
    # None = the whole pool; N over the pool is refused.
    limit: int | None = None
    # data=folder: a folder of strip images nobody labelled; self-training reads them with
    # the reader trained on data.path and trains on the readings it is sure of, in rounds
    # (attnlab.training.selftrain). None = none.
    unlabelled: str | None = None
    charset: str = "0123456789"  # the characters a label may hold; the readers' vocabulary

    @staticmethod
    def check_augment(d: Any) -> None:
        """data.augment: known names, each once, and real strips only."""
        names = [str(n) for n in (getattr(d, "augment", None) or [])]
        unknown = [n for n in names if n not in AUGMENT_NAMES]
        require(
            not unknown, "data.augment", names, f"knows {', '.join(AUGMENT_NAMES)}: not {unknown}"
        )
        once = len(set(names)) == len(names)
        require(once, "data.augment", names, "must name each operation once")
        ok = not names or d.source == "folder"
        rule = "augments real images: needs data=folder (synthetic strips vary by their own keys)"
        require(ok, "data.augment", names, rule)
        applied = not names or float(d.augmented) > 0  # the share of strips augmented at all
        rule = f"with data.augmented={d.augmented} no strip is augmented: give data.augmented > 0"
        require(applied, "data.augment", names, rule)

    @classmethod
    def check(cls, d: Any) -> None:
        """Values a type cannot rule out, one UserError naming the key."""
        cls.check_sources(d)
        require(d.height >= 16, "data.height", d.height, "must be >= 16 px")
        if d.train_length_set is not None:
            values = list(d.train_length_set)
            require(
                bool(values) and all(int(v) >= 1 for v in values),
                "data.train_length_set",
                values,
                "must list lengths >= 1",
            )
        else:
            span(d.train_lengths, "data.train_lengths")
        sizes = list(d.font_sizes)
        require(
            bool(sizes) and all(s >= 4 for s in sizes), "data.font_sizes", sizes, "must be >= 4 px"
        )
        require(
            all(s >= 0 for s in d.stroke_widths),
            "data.stroke_widths",
            list(d.stroke_widths),
            "must be >= 0",
        )
        require(d.variants >= 1, "data.variants", d.variants, "must be >= 1")
        require(d.v_offset >= 0, "data.v_offset", d.v_offset, "must be >= 0")
        require(d.val_per_length >= 1, "data.val_per_length", d.val_per_length, "must be >= 1")
        check_pairs(d, "data", ["scale", "stretch"], low=0.1)
        check_pairs(d, "data", ["noise", "blur", "contrast", "background"])
        check_pairs(d, "data", ["shear", "rotation"], low=-90.0)
        check_pairs(d, "data", ["gap"], low=-64.0)
        check_pairs(d, "data", ["margin"])
        check_pairs(d, "data", ["strip_scale"], low=0.1)
        check_pairs(d, "data", ["ink_level"], low=-0.9)
        require(
            d.ink_level[1] <= 0.9, "data.ink_level", list(d.ink_level), "must be in [-0.9, 0.9]"
        )
        check_pairs(d, "data", ["resample"], low=0.1)
        check_pairs(d, "data", ["jpeg_quality"], low=1.0)
        require(
            d.jpeg_quality[1] <= 100,
            "data.jpeg_quality",
            list(d.jpeg_quality),
            "must be in [1, 100]",
        )
        require(d.resample[1] <= 1.0, "data.resample", list(d.resample), "must be factors <= 1")
        for key, high in (
            ("dilate", 1.0), ("shading", 0.9), ("strip_shift", 16.0), ("wave", 8.0),
            ("marked_zeros", 1.0), ("oldstyle", 1.0), ("footless_ones", 1.0), ("augmented", 1.0),
            ("elastic", 4.0), ("slant", 1.0), ("jpeg", 1.0), ("clutter", 1.0),
        ):  # fmt: skip
            value = getattr(d, key)
            require(
                finite(value) and 0 <= value <= high,
                f"data.{key}",
                value,
                f"must be in [0, {high:g}]",
            )

    @staticmethod
    def check_sources(d: Any) -> None:
        """The labelled-strip keys (data=folder) and the charset."""
        ok = d.source in ("synthetic", "folder")
        require(ok, "data.source", d.source, "must be synthetic or folder (data=folder)")
        if d.source == "folder":
            need = "data=folder needs data.path=PATH (labels.csv folder, list file or LMDB)"
            require(bool(d.path), "data.path", d.path, need)
        share = d.val_share
        require(finite(share) and 0 <= share <= 0.9, "data.val_share", share, "must be in [0, 0.9]")
        ok = d.source != "folder" or share > 0 or bool(d.val_path)
        require(ok, "data.val_share", share, "must be > 0 unless data.val_path is given")
        require(finite(d.mix) and 0 <= d.mix < 1, "data.mix", d.mix, "must be in [0, 1)")
        if getattr(d, "limit", None) is not None:
            require(d.limit >= 1, "data.limit", d.limit, "must be >= 1 strips (null = all)")
            ok = d.source == "folder"
            require(ok, "data.limit", d.limit, "draws from labelled strips: needs data=folder")
        if getattr(d, "unlabelled", None) is not None:
            ok = d.source == "folder"
            rule = "self-trains beside labelled strips: needs data=folder data.path=PATH"
            require(ok, "data.unlabelled", d.unlabelled, rule)
        ok = not d.slant or d.source == "folder"
        rule = "leans real strips: needs data=folder (synthetic glyphs lean by data.shear)"
        require(ok, "data.slant", d.slant, rule)
        ok = not getattr(d, "clutter", 0) or d.source != "folder" or d.mix > 0
        rule = "clutters synthetic strips: with data=folder, give data.mix > 0"
        require(ok, "data.clutter", getattr(d, "clutter", 0), rule)
        DataConfig.check_augment(d)
        chars = str(d.charset)
        ok = (
            len(chars) >= 1
            and len(set(chars)) == len(chars)
            and not any(c.isspace() for c in chars)
        )
        require(ok, "data.charset", chars, "must list each character once, no spaces")
        # Synthetic strips draw any character some font renders (attnlab.data.glyphs refuses
        # one that none does, naming it, before a run writes anything).
