"""``python -m collc`` and the ``collc`` command: the signal handling of start-up first, then the CLI."""

import sys

from collc._startup import exit_on_signal, finish


def run() -> int:
    """The ``collc`` console script: until ``collc.cli.main`` installs its handlers (its imports take a
    second), a signal ends the process with one line and 128 + the signal, never a traceback; when the
    command is done the process ends at once with its code (``finish``: no interpreter shutdown)."""
    exit_on_signal()
    from collc.cli import main
    finish(main())


if __name__ == "__main__":
    sys.exit(run())
