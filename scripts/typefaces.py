"""Held-out typeface benchmark (attnlab.bench.typefaces): does a reader read typefaces it was
not trained on? ``python scripts/typefaces.py --help`` lists the options."""

import sys

from attnlab.bench.typefaces import main

if __name__ == "__main__":
    main(sys.argv[1:])
