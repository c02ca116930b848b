"""``python -m pytest_theodolite``: the command-line tools (see pytest_theodolite/cli/)."""

import sys

from pytest_theodolite.cli.analyse import main

if __name__ == "__main__":
    sys.exit(main())
