"""Atomic outputs that survive SIGINT and SIGTERM at any moment.

Every file collc writes is first written to a temporary name in the target's own
directory (so the final rename is atomic) and renamed into place; a directory
(per-rank shards, ``tune`` output) is built the same way as a hidden temporary
directory.  Each temporary path is recorded, with signals held (:func:`signals_blocked`)
between its creation and its record, in a process-wide list that :func:`discard_pending`
removes; :func:`interrupt_handlers` installs SIGINT/SIGTERM/SIGHUP handlers that
call it and then stop the command (the CLI exits 130, 143 or 129: 128 + the signal
number, the shell's convention).
The renames that publish a result also run with signals held, so an
interrupt leaves either the old state or the new one, never a mixture.

Files are created with mode ``0666`` and directories ``0777`` minus the umask
(and default ACLs), as any shell redirection would: a schedule in a shared
directory stays readable by the other accounts of a cluster.

>>> import tempfile
>>> d = Path(tempfile.mkdtemp())
>>> write_file(d / "x.xml", "<algo>\\n")
>>> sorted(p.name for p in d.iterdir()), pending()
(['x.xml'], [])
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from collc._startup import SIGNALS as _SIGNALS
from collc._startup import end_interrupted, is_program
from collc.errors import EmitError
from collc.inputs import output_dir, output_file, show

__all__ = ["Interrupted", "write_file", "new_temp_dir", "publish_dir", "discard", "discard_pending", "pending",
           "interrupt_handlers", "signals_blocked"]

_pending: dict[str, bool] = {}          # temporary path -> is a directory
_lock = threading.RLock()   # re-entered by a signal handler that runs while it is held


class Interrupted(BaseException):
    """Raised in the main thread by SIGINT, SIGTERM or SIGHUP after the temporary outputs are removed."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


_critical = 0                    # depth of signals_blocked() sections
_deferred: list[int] = []        # a signal that arrived inside one
_fire: list[Callable[[int], None]] = []   # the active handler's action (set by interrupt_handlers)


@contextmanager
def signals_blocked() -> Iterator[None]:
    """Run the body as one step with respect to those signals: a signal that arrives inside it
    takes effect when the outermost such section ends.

    This is done in Python rather than with the process signal mask: CPython runs a
    Python-level handler at the next bytecode boundary, which can be inside a masked region
    (the signal arrived just before the mask was set).
    """
    global _critical
    _critical += 1
    try:
        yield
    finally:
        _critical -= 1
        if _critical == 0 and _deferred and _fire:
            _fire[-1](_deferred.pop())


def pending() -> list[str]:
    """Temporary paths not yet published or removed (for tests)."""
    with _lock:
        return sorted(_pending)


def discard(path: str | os.PathLike[str]) -> None:
    """Remove a temporary file or directory and forget it (missing is fine)."""
    key = os.fspath(path)
    with _lock:
        is_dir = _pending.pop(key, None)
    if is_dir:
        shutil.rmtree(key, ignore_errors=True)
        if os.path.lexists(key):
            # a worker process wrote into it meanwhile: pending still, for the next discard_pending
            # (interrupt_handlers' last, once the workers are stopped)
            with _lock:
                _pending[key] = True
    else:
        try:
            os.unlink(key)
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            shutil.rmtree(key, ignore_errors=True)
        except OSError:
            pass


def discard_pending() -> None:
    """Remove every temporary output of this process (the signal handlers call this)."""
    for key in pending():
        discard(key)


def _temp_name(target: Path, tag: str) -> Path:
    """A hidden name next to ``target`` that fits the directory's name limit."""
    parent = target.parent if str(target.parent) else Path(".")
    token = os.urandom(4).hex()    # what secrets.token_hex(4) returns, without its import
    room = max(0, 200 - len(tag) - len(token))
    stem = os.fsdecode(os.fsencode(target.name)[:room]) if room else ""
    return parent / f".{stem}.{token}.{tag}"


def _register(make: Callable[[Path], None], target: Path, tag: str, is_dir: bool) -> Path:
    for _ in range(100):
        tmp = _temp_name(target, tag)
        with signals_blocked():
            try:
                make(tmp)
            except FileExistsError:
                continue
            except OSError as exc:
                raise _cannot_write(target, exc) from None
            with _lock:
                _pending[os.fspath(tmp)] = is_dir
        return tmp
    raise EmitError(f"cannot write {show(target)}: no free temporary name")  # pragma: no cover


def _create_file(tmp: Path) -> None:
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    os.close(fd)


def write_file(path: str | os.PathLike[str], data: str | bytes, encoding: str = "ascii",
               executable: bool = False) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file in the same directory, then a rename.

    ``path`` is checked as an output file first (and again just before the rename): an
    existing directory, device, FIFO or symbolic link there is refused, never replaced.
    """
    target = output_file(path, "", EmitError)
    tmp = _register(_create_file, target, "tmp", False)
    with _or_discard(tmp, target):
        raw = data.encode(encoding) if isinstance(data, str) else data
        with open(tmp, "wb") as fh:
            fh.write(raw)
        if executable:
            _add_exec(tmp)
        with signals_blocked():
            output_file(target, "", EmitError)     # nothing odd appeared there meanwhile
            os.replace(tmp, target)
            _published(tmp)


def _cannot_write(where: Path, exc: OSError) -> EmitError:
    return EmitError(f"cannot write {show(where)}: {(exc.strerror or str(exc)).lower()}")


@contextmanager
def _or_discard(tmp: Path, where: Path) -> Iterator[None]:
    """Remove the pending ``tmp`` when the body fails; an OSError becomes one line naming ``where``."""
    try:
        yield
    except OSError as exc:
        discard(tmp)
        raise _cannot_write(where, exc) from None
    except BaseException:
        discard(tmp)
        raise


def _published(tmp: Path) -> None:
    """``tmp`` was renamed into place: no longer pending."""
    with _lock:
        _pending.pop(os.fspath(tmp), None)


def _add_exec(p: Path) -> None:
    mode = stat.S_IMODE(os.stat(p).st_mode)
    os.chmod(p, mode | ((mode & 0o444) >> 2))   # x wherever r: what chmod +x does under a umask


def new_temp_dir(target: str | os.PathLike[str]) -> Path:
    """A fresh hidden directory next to ``target`` (mode 0777 minus the umask), recorded as pending."""
    return _register(lambda p: os.mkdir(p, 0o777), Path(target), "partial", True)


def write_into(directory: Path, relpath: str, data: str | bytes, encoding: str = "ascii",
               executable: bool = False) -> None:
    """Write a file inside a pending temporary directory (created with the umask's mode)."""
    p = directory / relpath
    raw = data.encode(encoding) if isinstance(data, str) else data
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                     0o777 if executable else 0o666)
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
    except OSError as exc:
        raise _cannot_write(p, exc) from None


def publish_dir(tmp: Path, target: str | os.PathLike[str], replace: bool) -> None:
    """Move the pending directory ``tmp`` to ``target``; an existing ``target`` is replaced only
    with ``replace`` (moved aside first and removed after, the two renames with signals blocked)."""
    dest = output_dir(target, "", EmitError)
    old: Path | None = None
    try:
        with _or_discard(tmp, dest), signals_blocked():
            if os.path.lexists(dest):
                if not replace:
                    raise EmitError(f"{show(dest)} already exists")
                old = _register(lambda p: os.mkdir(p, 0o700), dest, "old", True)
                os.rename(dest, old / "x")
                try:
                    os.rename(tmp, dest)
                except OSError:
                    os.rename(old / "x", dest)      # put the previous version back
                    raise
            else:
                os.rename(tmp, dest)
            _published(tmp)
    finally:
        if old is not None:
            discard(old)


def _stop_workers() -> None:
    """Kill this process's worker processes and wait (briefly) until they are gone."""
    mp = sys.modules.get("multiprocessing")
    if mp is None:
        return
    children = mp.active_children()
    for child in children:
        try:
            child.kill()
        except OSError:
            pass
    for child in children:
        child.join(2.0)


@contextmanager
def interrupt_handlers() -> Iterator[None]:
    """While the body runs (main thread only), SIGINT, SIGTERM and SIGHUP remove every pending temporary
    output and raise :class:`Interrupted` (after any :func:`signals_blocked` section); later
    signals are ignored until the body exits."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired: list[int] = []

    def stop(signum: int) -> None:
        fired.append(signum)
        if is_program():
            _stop_workers()      # first: a worker may be writing into a pending directory
        discard_pending()
        if is_program():
            end_interrupted(signum)      # no unwinding through worker pools: one line and 128 + N, now
        raise Interrupted(signum)

    def handler(signum: int, frame: FrameType | None) -> None:
        if fired:
            return
        if _critical:
            if not _deferred:
                _deferred.append(signum)
            return
        stop(signum)

    # a signal the caller ignores stays ignored (nohup ignores SIGHUP, a shell's background jobs SIGINT)
    old = {s: signal.signal(s, handler) for s in _SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}
    _fire.append(stop)
    try:
        yield
    finally:
        _fire.pop()
        _deferred.clear()
        for s, h in old.items():
            signal.signal(s, h)
        discard_pending()
