"""attnlab: the Lab 8 digit-reader comparison (fixed-context vs attention readers)."""

__version__ = "0.1.0"
