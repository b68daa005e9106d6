"""Fonts: where the typefaces strips are drawn in come from.

Sets of fonts that ship inside installed Python packages (Pillow's and matplotlib's,
ReportLab's, the font packages'), so that every machine draws the same strips; paths and
globs for any other font (system fonts, an opt-in); ``data.exclude_fonts``.
"""

from __future__ import annotations

import functools
import glob
from pathlib import Path

from attnlab.config import DataConfig
from attnlab.errors import UserError

# Symbol-only or display fonts whose digits are missing or not digits (file-name substrings:
# DejaVuSansDisplay and DejaVuSerifDisplay draw a placeholder box for every digit).
_SKIP_FONTS = ("cmex10", "cmsy10", "STIXSiz", "Display", "LastResort", "STIXNonUni")


def bundled_fonts() -> list[str]:
    """TrueType fonts shipped with matplotlib that render all ten digits, plus Pillow's own."""
    import matplotlib

    ttf = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    paths = sorted(
        str(p) for p in ttf.glob("*.ttf") if not any(skip in p.stem for skip in _SKIP_FONTS)
    )
    return ["pillow:default", *paths]


# The Type 1 fonts ReportLab ships for PDF's core typefaces, four styles each (regular, bold,
# bold italic, italic): Arial for Helvetica, Times New Roman for Times, and Courier.
REPORTLAB_FONTS = {
    "helvetica": ("_a______", "_ab_____", "_abi____", "_ai_____"),
    "times": ("_er_____", "_eb_____", "_ebi____", "_ei_____"),
    "courier": ("com_____", "cob_____", "cobo____", "coo_____"),
}


def reportlab_fonts() -> list[str]:
    """ReportLab's Arial, Times New Roman and Courier (``REPORTLAB_FONTS``), as font files."""
    folder = _package_folder("reportlab") / "fonts"
    paths = [folder / f"{stem}.pfb" for stems in REPORTLAB_FONTS.values() for stem in stems]
    missing = [p.name for p in paths if not p.exists()]
    if missing:
        raise UserError(f"data.fonts: reportlab lacks {', '.join(missing)} in {folder}")
    return [str(p) for p in paths]


# The typefaces of pymupdf-fonts (pure data: each font an lzma-packed buffer in a module of
# its own), all styles it has: Cascadia Mono, Fira Go, Fira Mono, Noto Sans, Space Mono,
# Ubuntu and Ubuntu Mono. Its symbol, math and music fonts are left out.
PYMUPDF_FONTS = tuple(
    f"{family}_{style}"
    for family in ("CascadiaMono", "FiraGO", "NotoSans", "SpaceMono", "Ubuntu", "UbuntuMono")
    for style in ("Regular", "Bold", "Italic", "BoldItalic")
) + ("FiraMono_Regular", "FiraMono_Bold")
_PYMUPDF = "pymupdf-fonts:"  # a font source from pymupdf-fonts: the prefix, then the module


def _package_folder(package: str) -> Path:
    """The folder of an installed package, by its name on PyPI."""
    import importlib

    try:
        module = importlib.import_module(package.replace("-", "_"))
    except ImportError as err:
        raise UserError(f"data.fonts: {package} is not installed (pip install {package})") from err
    return Path(module.__file__).parent


def pymupdf_fonts() -> list[str]:
    """pymupdf-fonts' typefaces (``PYMUPDF_FONTS``), as font sources ``load_font`` reads."""
    folder = _package_folder("pymupdf-fonts")
    missing = [m for m in PYMUPDF_FONTS if not (folder / f"{m}.py").is_file()]
    if missing:
        raise UserError(f"data.fonts: pymupdf-fonts lacks {', '.join(missing)} in {folder}")
    return [_PYMUPDF + m for m in PYMUPDF_FONTS]


# Font packages on PyPI whose files lie in <package>/files: regular, bold and italic styles.
FONT_PACKAGES = {
    "font-lato": ("Lato-Regular", "Lato-Bold", "Lato-Italic", "Lato-BoldItalic"),
    "font-source-serif-pro": (
        "SourceSerifPro-Regular",
        "SourceSerifPro-Bold",
        "SourceSerifPro-It",
        "SourceSerifPro-BoldIt",
    ),
}


def package_fonts(package: str) -> list[str]:
    """The ``FONT_PACKAGES`` typefaces of one font package, as font files."""
    folder = _package_folder(package) / "files"
    paths = [folder / f"{stem}.ttf" for stem in FONT_PACKAGES[package]]
    missing = [p.name for p in paths if not p.exists()]
    if missing:
        raise UserError(f"data.fonts: {package} lacks {', '.join(missing)} in {folder}")
    return [str(p) for p in paths]


# Names in data.fonts for fonts that ship inside installed Python packages.
FONT_SETS = {
    "bundled": bundled_fonts,
    "reportlab": reportlab_fonts,
    "pymupdf-fonts": pymupdf_fonts,
    **{name: functools.partial(package_fonts, name) for name in FONT_PACKAGES},
}


def resolve_fonts(data: DataConfig) -> list[str]:
    """Font sources named by the config: a set of ``FONT_SETS`` or paths / globs, minus
    exclusions."""
    fonts: list[str] = []
    for entry in data.fonts:
        if entry in FONT_SETS:
            fonts.extend(FONT_SETS[entry]())
            continue
        matches = sorted(glob.glob(str(Path(entry).expanduser())))
        if not matches:
            raise UserError(
                f"data.fonts: no font file matches {entry!r} (font sets: {', '.join(FONT_SETS)})"
            )
        fonts.extend(matches)
    fonts = [f for f in fonts if not any(x in Path(f).name for x in data.exclude_fonts)]
    if not fonts:
        raise UserError("data.fonts: no fonts left after data.exclude_fonts")
    return fonts


def load_font(source: str, size: int):
    """A Pillow font of ``size`` px from a source ``resolve_fonts`` gives."""
    from PIL import ImageFont

    if source == "pillow:default":
        return ImageFont.load_default(size=size)
    if source.startswith(_PYMUPDF):
        import importlib
        import io

        module = importlib.import_module(f"pymupdf_fonts.{source[len(_PYMUPDF) :]}")
        return ImageFont.truetype(io.BytesIO(module.fontbuffer), size=size)
    try:
        return ImageFont.truetype(source, size=size)
    except OSError as err:
        raise UserError(f"data.fonts: cannot load font {source}: {err}") from err
