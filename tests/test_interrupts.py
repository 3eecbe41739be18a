"""SIGTERM, SIGINT and SIGHUP at several moments of real ``collc`` processes leave no file behind and
end with one line and 128 + the signal.

Each run starts ``python -m collc.cli build`` (one file, or ``--shard-per-rank``) in an
empty directory and signals it a delay after collc's first code ran (while it imports, builds or
lowers) or as soon as its temporary output appears (while it writes).  Afterwards the directory
holds nothing, or, if the build finished first, exactly the complete output.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collc.cli import main

REPO = Path(__file__).resolve().parents[1]
SWING = ["--algorithm", "swing", "--collective", "allreduce"]
KINDS = {"file": ["-o", "out.xml"], "shards": ["--shard-per-rank", "-o", "out"]}
INTERRUPTED = {signal.SIGINT: (130,), signal.SIGTERM: (143,)}


def _catches_sigterm(pid: int) -> bool:
    """Whether the process has a handler for SIGTERM (the SigCgt mask of /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:")), 0)
    return bool(caught >> (signal.SIGTERM - 1) & 1)


def _until_started(proc: subprocess.Popen[str]) -> None:
    """Until collc's first code has run (its start-up handler is installed), or the process ended.

    Before that the interpreter is still starting (tens of ms, longer on a loaded machine) and a
    signal takes its default action: no program can answer it then."""
    while proc.poll() is None and not _catches_sigterm(proc.pid):
        time.sleep(0.0005)


def _complete(d: Path, kind: str, ranks: int) -> bool:
    if kind == "file":
        return (d / "out.xml").read_text().endswith("</algo>\n")
    out = d / "out"
    return (out / "run-with-msccl.sh").is_file() and all(
        len(list((out / f"rank-{r}").iterdir())) == 1 for r in range(ranks))


def _interrupt(d: Path, topology: str, kind: str, sig: signal.Signals, moment: float | str) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "collc.cli", "build", "--topology", topology, *SWING,
                             *KINDS[kind]], cwd=d, env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen_temp = False
    if moment == "writing":      # the first hidden temporary file or directory
        while proc.poll() is None and not seen_temp:
            seen_temp = any(name.startswith(".") for name in os.listdir(d))
            if not seen_temp:
                time.sleep(0.0005)
    else:
        assert isinstance(moment, float)
        _until_started(proc)
        time.sleep(moment)
    if proc.poll() is None:
        proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    left = sorted(os.listdir(d))
    ranks = 1
    for part in topology.split(":")[1].split("x"):
        ranks *= int(part)
    if proc.returncode == 0:
        assert left == [KINDS[kind][-1]] and _complete(d, kind, ranks), (left, err)
        return
    assert proc.returncode in INTERRUPTED[sig], (proc.returncode, err)
    # interrupted: nothing left, or (a signal after the final rename) the complete output only
    assert left in ([], [KINDS[kind][-1]]), left
    if left:
        assert _complete(d, kind, ranks)
    assert proc.returncode == 128 + sig, (proc.returncode, err)
    assert err.count("\n") == 1 and err.startswith("collc: interrupted"), err
    # A signal while writing leaves nothing or (it landed just after the final rename, which
    # a loaded machine makes likely) the complete output: never the temporary or a partial file,
    # which the two assertions above already rule out.
    if os.environ.get("COLLC_TRACE_INTERRUPTS"):
        print(f"{kind} {sig.name} {moment}: rc {proc.returncode}, saw temp {seen_temp}", file=sys.stderr)


TERM, INT = signal.SIGTERM, signal.SIGINT


@pytest.mark.parametrize("kind, sig, moment", [
    ("file", TERM, 0.5), ("file", INT, 1.2), ("file", TERM, "writing"), ("file", INT, "writing"),
    ("shards", INT, 0.5), ("shards", TERM, 1.2), ("shards", TERM, "writing"), ("shards", INT, "writing")])
def test_interrupted_build_leaves_nothing(tmp_path: Path, kind: str, sig: signal.Signals,
                                          moment: float | str) -> None:
    _interrupt(tmp_path, "torus:16x8", kind, sig, moment)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("moment", [2.0, 4.0, "writing"])
def test_interrupted_large_build_leaves_nothing(tmp_path: Path, kind: str, sig: signal.Signals,
                                                moment: float | str) -> None:
    _interrupt(tmp_path, "torus:16x16", kind, sig, moment)


def test_interrupt_replacing_shards_keeps_the_old_set(tmp_path: Path) -> None:
    """A rebuild over an earlier shard directory that is interrupted while writing leaves the old set."""
    first = subprocess.run([sys.executable, "-m", "collc.cli", "build", "--topology", "torus:4x4", *SWING,
                            "--shard-per-rank", "-o", "out"], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                           capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    before = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "out").rglob("*"))
    _interrupt_rebuild = subprocess.Popen(
        [sys.executable, "-m", "collc.cli", "build", "--topology", "torus:16x8", *SWING, "--shard-per-rank",
         "-o", "out"], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    while _interrupt_rebuild.poll() is None and not any(n.startswith(".") for n in os.listdir(tmp_path)):
        time.sleep(0.0005)
    _interrupt_rebuild.send_signal(signal.SIGTERM)
    _interrupt_rebuild.communicate(timeout=120)
    left = sorted(os.listdir(tmp_path))
    assert left == ["out"]
    after = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "out").rglob("*"))
    if _interrupt_rebuild.returncode == 0:   # it won the race: the new set, whole
        assert len(list((tmp_path / "out").glob("rank-*"))) == 128
    else:
        assert after == before or len(list((tmp_path / "out").glob("rank-*"))) == 128


@pytest.mark.parametrize("ignored", [False, True], ids=["hangup", "nohup"])
def test_sighup_stops_the_build_unless_ignored(tmp_path: Path, ignored: bool) -> None:
    """SIGHUP (the terminal closed) cleans up like SIGTERM; under nohup (SIGHUP ignored) the build goes on."""
    def ignore() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    proc = subprocess.Popen([sys.executable, "-m", "collc.cli", "build", "--topology", "torus:8x8", *SWING,
                             "-o", "out.xml"], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                            preexec_fn=ignore if ignored else None, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    while proc.poll() is None and not any(n.startswith(".") for n in os.listdir(tmp_path)):
        time.sleep(0.0005)
    if proc.poll() is None:
        proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=120)
    if ignored or proc.returncode == 0:
        assert proc.returncode == 0 and os.listdir(tmp_path) == ["out.xml"], err
    else:
        # nothing, or (the signal came after the final rename) the whole, checked file
        assert proc.returncode == 129 and os.listdir(tmp_path) in ([], ["out.xml"]), err
        if os.listdir(tmp_path):
            assert main(["check", str(tmp_path / "out.xml")]) == 0


START_UP = {
    "build": ["build", "--topology", "torus:8x8", *SWING, "-o", "out.xml"],
    "ranks": ["build", "--topology", "torus:8x8", *SWING, "--shard-per-rank", "--ranks", "0-7", "-o", "sh"],
    "tune": ["tune", "--topology", "ring:8", "--collective", "allreduce", "--algorithm", "ring", "--sizes", "1KiB",
             "-o", "tuned"],
    "compare": ["compare", "--topology", "torus:4x4", "--collective", "allreduce", "--plot", "c.png"],
}


@pytest.mark.parametrize("entry", [["-m", "collc.cli"], ["-m", "collc"]], ids=["cli", "collc"])
@pytest.mark.parametrize("command, sig, moment", [
    ("build", signal.SIGINT, 0.0), ("build", signal.SIGHUP, 0.16), ("ranks", signal.SIGTERM, 0.0),
    ("ranks", signal.SIGINT, 0.3), ("tune", signal.SIGTERM, 0.05), ("tune", signal.SIGINT, 0.6),
    ("compare", signal.SIGHUP, 0.0), ("compare", signal.SIGTERM, 1.2)])
def test_a_signal_during_start_up_gives_one_line_and_128_plus_it(tmp_path: Path, entry: list[str], command: str,
                                                                  sig: signal.Signals, moment: float) -> None:
    """From collc's first line on (imports, argument parsing, the command's own handlers later), a
    signal ends the run with exactly one line, 128 + the signal, and no file; never Python's default
    action or a KeyboardInterrupt traceback."""
    proc = subprocess.Popen([sys.executable, *entry, *START_UP[command]], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _until_started(proc)
    time.sleep(moment)
    if proc.poll() is None:
        proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:      # finished first: the whole output
        assert os.listdir(tmp_path) == [START_UP[command][-1]], err
        return
    assert proc.returncode == 128 + sig, (proc.returncode, err)
    assert err.count("\n") == 1 and err.startswith(f"collc: interrupted by {sig.name}"), err
    # nothing, or (the signal came after the final rename, as the process ended) the output, whole:
    # what a rename publishes is complete by construction (collc.outputs)
    assert os.listdir(tmp_path) in ([], [START_UP[command][-1]]), os.listdir(tmp_path)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_interrupt_while_workers_write_the_staged_shards(tmp_path: Path, sig: signal.Signals) -> None:
    """The workers write the ranks' files into the staged directory themselves: a signal while they
    do (its first rank-K directory appeared) stops them before the directory is removed."""
    proc = subprocess.Popen([sys.executable, "-m", "collc.cli", "build", "--topology", "torus:16x16", *SWING,
                             "--shard-per-rank", "--jobs", "2", "-o", "out"], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    def writing() -> bool:
        try:
            return any(n.startswith(".") and any(p.startswith("rank-") for p in os.listdir(tmp_path / n))
                       for n in os.listdir(tmp_path))
        except OSError:          # gone meanwhile, or not a directory
            return False

    while proc.poll() is None and not writing():
        time.sleep(0.0005)
    if proc.poll() is None:
        proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    time.sleep(0.5)          # a worker that outlived its parent would write within this
    left = sorted(os.listdir(tmp_path))
    if proc.returncode == 0:
        assert left == ["out"] and _complete(tmp_path, "shards", 256)
    else:
        assert proc.returncode == 128 + sig, (proc.returncode, err)
        assert left in ([], ["out"]), left
        assert err.count("\n") == 1 and err.startswith("collc: interrupted"), err
