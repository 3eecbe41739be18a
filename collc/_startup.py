"""What a ``collc`` process does about signals before a command installs its own handlers.

This module imports only ``os`` and ``signal``: the entry points call :func:`exit_on_signal` first, so
that a signal during start-up (a second of imports) already ends the process the documented way.
"""

from __future__ import annotations

import os
import signal
from types import FrameType
from typing import NoReturn

# SIGHUP: the terminal of a long build was closed (absent on Windows)
SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


_program: list[bool] = []      # exit_on_signal() was called: this process is the collc program


def ignore_signals() -> None:
    """In the collc program (not a caller of ``collc.cli.main`` in-process), ignore SIGINT, SIGTERM and
    SIGHUP from here on: the command is reporting how it ended, in one line."""
    if _program:
        for s in SIGNALS:
            signal.signal(s, signal.SIG_IGN)


def _exit(signum: int, frame: FrameType | None) -> None:
    for s in SIGNALS:     # one line, even when a second signal follows at once
        signal.signal(s, signal.SIG_IGN)
    try:
        os.write(2, f"collc: interrupted by {signal.Signals(signum).name}\n".encode())
    finally:
        os._exit(128 + signum)


def exit_on_signal() -> None:
    """Outside a command's own handlers (``collc.outputs.interrupt_handlers``: start-up, imports, argument
    parsing, and the report after the command), SIGINT, SIGTERM and SIGHUP end the process at once with
    one line and exit code 128 + the signal.

    Nothing is being written then, so there is nothing to remove. ``os._exit`` rather than an exception:
    an exception raised inside an import leaves a half-initialised module behind it (numpy reports
    "initialization failed"), and Python would print its traceback. Signals the caller ignores (nohup,
    a shell's background jobs) stay ignored.
    """
    _program.append(True)
    for s in SIGNALS:
        if signal.getsignal(s) is not signal.SIG_IGN:
            signal.signal(s, _exit)



def is_program() -> bool:
    """Whether this process is the collc program (``exit_on_signal`` ran), not a caller of ``collc.cli.main``."""
    return bool(_program)


def end_interrupted(signum: int) -> NoReturn:
    """The collc program, interrupted with its unfinished outputs already removed: stop the worker
    processes it started (SIGKILL: a fork worker that has not run its initializer yet still has the
    parent's Python handler, which it never runs, so SIGTERM would not stop it and a pool's orderly
    shutdown would wait for it forever), write the one line and end with 128 + the signal.  Unwinding
    through a worker pool's shutdown instead can hang (its locks may be held by a worker)."""
    import sys
    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    mp = sys.modules.get("multiprocessing")
    if mp is not None:
        for child in mp.active_children():
            try:
                child.kill()
            except OSError:
                pass
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    try:
        os.write(2, f"collc: interrupted by {signal.Signals(signum).name}; unfinished output removed\n".encode())
    finally:
        os._exit(128 + signum)


def finish(code: int) -> NoReturn:
    """End the collc program with ``code`` once the command is done: flush, then ``os._exit``.

    Interpreter shutdown is skipped on purpose: during it Python puts the default signal actions back (a
    signal then ends the process silently, with -SIGNAL), and it runs daemon threads (a progress bar's
    monitor) and C extensions' finalisers against a half-stopped interpreter, which can die of SIGABRT
    ("Fatal Python error") after the command's last line. collc registers no exit handlers and leaves no
    file open, so nothing is lost."""
    import sys
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):     # a closed pipe: what was written so far is all the reader gets
            pass
    os._exit(code)
