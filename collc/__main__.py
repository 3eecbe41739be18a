"""``python -m collc`` and the ``collc`` command: the signal handling of start-up first, then the CLI."""

import sys

from collc._startup import exit_on_signal


def run() -> int:
    """The ``collc`` console script: until ``collc.cli.main`` installs its handlers (its imports take a
    second), a signal ends the process with one line and 128 + the signal, never a traceback."""
    exit_on_signal()
    from collc.cli import main
    return main()


if __name__ == "__main__":
    sys.exit(run())
