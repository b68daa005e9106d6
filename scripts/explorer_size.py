"""Page size and load time of the report's explorer at the default sweep's scale
(attnlab.bench.explorer_size): ``python scripts/explorer_size.py --help``."""

import sys

from attnlab.bench.explorer_size import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
