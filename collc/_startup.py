"""What a ``collc`` process does about signals outside a command's own handlers, and how it ends.

This module imports only ``os`` and ``signal``: the entry points call :func:`exit_on_signal` first, so
that a signal during start-up (a second of imports) already ends the process the documented way.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType
from typing import NoReturn

# SIGHUP: the terminal of a long build was closed (absent on Windows)
SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))

_program = False      # exit_on_signal() ran: this process is the collc program, not a caller of main()


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, RuntimeError):
            pass      # a closed pipe, or (in a signal handler) a write the signal interrupted: keep what got out


def _die(signum: int, detail: str = "") -> NoReturn:
    """One line, ``collc: interrupted by SIGNAL[; detail]``, and exit code 128 + the signal; later signals
    are ignored so that the line stays the only one."""
    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    _flush()
    try:
        os.write(2, f"collc: interrupted by {signal.Signals(signum).name}{detail}\n".encode())
    finally:
        os._exit(128 + signum)


def _exit(signum: int, frame: FrameType | None) -> None:
    _die(signum)


def exit_on_signal() -> None:
    """Outside a command's own handlers (``collc.outputs.interrupt_handlers``: start-up, imports, argument
    parsing, and the report after the command), SIGINT, SIGTERM and SIGHUP end the process at once with
    one line and exit code 128 + the signal.

    Nothing is being written then, so there is nothing to remove. ``os._exit`` rather than an exception:
    an exception raised inside an import leaves a half-initialised module behind it (numpy reports
    "initialization failed"), and Python would print its traceback. Signals the caller ignores (nohup,
    a shell's background jobs) stay ignored.
    """
    global _program
    _program = True
    for s in SIGNALS:
        if signal.getsignal(s) is not signal.SIG_IGN:
            signal.signal(s, _exit)


def is_program() -> bool:
    """Whether this process is the collc program (``exit_on_signal`` ran), not a caller of ``collc.cli.main``."""
    return _program


def end_interrupted(signum: int) -> NoReturn:
    """The collc program, interrupted with its unfinished outputs already removed: stop the worker
    processes it started (SIGKILL: a fork worker that has not run its initializer yet still has the
    parent's Python handler, which it never runs, so SIGTERM would not stop it and a pool's orderly
    shutdown would wait for it forever), write the one line and end with 128 + the signal.  Unwinding
    through a worker pool's shutdown instead can hang (its locks may be held by a worker)."""
    mp = sys.modules.get("multiprocessing")
    if mp is not None:
        for child in mp.active_children():
            try:
                child.kill()
            except OSError:
                pass
    _die(signum, "; unfinished output removed")


def finish(code: int) -> NoReturn:
    """End the collc program with ``code`` once the command is done: flush, then ``os._exit``.

    Interpreter shutdown is skipped on purpose: during it Python puts the default signal actions back (a
    signal then ends the process silently, with -SIGNAL), and it runs daemon threads (a progress bar's
    monitor) and C extensions' finalisers against a half-stopped interpreter, which can die of SIGABRT
    ("Fatal Python error") after the command's last line. collc registers no exit handlers and leaves no
    file open, so nothing is lost."""
    _flush()
    os._exit(code)
