"""Kept for imports written before the encoders became a choice: the column encoder now lives
in ``attnlab/models/encoders/column.py`` (``encoder=column``), beside ``vgg`` and ``resnet``."""

from attnlab.models.encoders.column import ColumnEncoder

__all__ = ["ColumnEncoder"]
