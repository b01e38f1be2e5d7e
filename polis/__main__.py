"""``python -m polis``: the ``polis`` command."""

import sys

from polis.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
