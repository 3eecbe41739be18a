"""The event model runs every tb's program once per run of the executor's gridOffset loop
(``SizeModel.iterations``, docs/simulation.md): hand-computed schedules, per-run flags,
pipelining across runs, and the aggregation of identical runs against simulating each."""

from __future__ import annotations

import pytest

from collc.compiler.msccl.program import Gpu, Program, Proto, Step, StepType, Threadblock
from collc.driver import compile_xml
from collc.ir.collective import CollKind
from collc.sim.event import simulate_program, trace_program
from collc.topology import parse_spec

MIB = 1 << 20
GIB = 1 << 30
LOOP = 2 * MIB                 # the executor's Simple chunkSize: 4 steps of 512 KiB
X = LOOP / 1e3                 # us to move one 2 MiB slice over a 1 GB/s link (1e3 bytes per us)


def test_ring2_allreduce_runs_its_program_three_times() -> None:
    # ring:2 allreduce, 2 chunks, 10 MiB: 5 MiB chunks, so three runs moving 2 MiB, 2 MiB and
    # 1 MiB of each chunk (X = 2097.152 us and Y = X / 2 on the 1 GB/s links).  Per gpu, tb 1
    # sends (s, then s waiting for tb 0's step 0) and tb 0 receives (rrc, then r); both
    # directions run the same schedule.  Run k starting at t:
    #   s        flows from t + a (alpha) to t + a + X   (sender busy until then)
    #   rrc      the peer's piece arrives at t + a + X   (publishes tb 0's flag (k, 0))
    #   s        waits for flag (k, 0): flows t + 2a + X .. t + 2a + 2X
    #   r        receives at t + 2a + 2X: the run ends, the next starts there
    # so 2 (a + X) per full run and 2 (a + Y) for the last: 6a + 4X + 2Y.  One run of 5 MiB
    # pieces (the model before runs) gave 2a + 2 x 5 MiB / 1e3 = 2a + 4X + 2Y: 4a less.
    topo = parse_spec("ring:2")
    prog = compile_xml(topo, "ring", CollKind.ALLREDUCE, inplace=True).program
    assert (prog.proto, prog.nchunksperloop) == (Proto.SIMPLE, 2)
    a = 10.0
    t = simulate_program(prog, topo, [10 * MIB], alpha_us=a)[0].time_us
    assert t == pytest.approx(6 * a + 4 * X + 2 * (X / 2))
    # a flag of run k - 1 does not release run k's wait: were it compared by step alone, the
    # second s of run 1 would go at once, 1 alpha + 1 X earlier
    assert trace_program(prog, topo, 10 * MIB, alpha_us=a).time_us == pytest.approx(t)
    # one run (chunks up to 2 MiB): unchanged, 2a + 2 x chunk / 1e3
    assert simulate_program(prog, topo, [4 * MIB], alpha_us=a)[0].time_us == pytest.approx(2 * a + 2 * X)


def _chain() -> Program:
    """gpu 0 sends one chunk to gpu 1, which forwards it (rcs) to gpu 2."""
    def tb(tid: int, send: int, recv: int, ty: StepType) -> Threadblock:
        return Threadblock(tid, send, recv, 0, (Step(0, ty, "i", 0, "i", 0, 1, -1, -1, 0),))
    gpus = (Gpu(0, 1, 0, 0, (tb(0, 1, -1, StepType.SEND),)),
            Gpu(1, 1, 0, 0, (tb(0, 2, 0, StepType.RECV_COPY_SEND),)),
            Gpu(2, 1, 0, 0, (tb(0, -1, 1, StepType.RECV),)))
    return Program("chain", Proto.SIMPLE, 1, 1, 3, "alltoall", 1, 0, 0, 0, gpus)


def test_a_forwarded_chunk_pipelines_across_runs() -> None:
    # 4 MiB chunk, two runs of 2 MiB.  gpu 0: run 0 flows a .. a + X, run 1 a + X + a ..
    # 2a + 2X (its FIFO is drained at a + X).  gpu 1's rcs forwards run 0 at a + X: flows
    # 2a + X .. 2a + 2X; then run 1 (arrived at 2a + 2X): 3a + 2X .. 3a + 3X, when gpu 2 has
    # it.  One 4 MiB piece would arrive whole at a + 2X and be forwarded by 2a + 4X.
    a = 10.0
    t = simulate_program(_chain(), parse_spec("ring:3"), [4 * MIB], alpha_us=a)[0].time_us
    assert t == pytest.approx(3 * a + 3 * X)
    assert t < 2 * a + 4 * X


@pytest.mark.parametrize("spec,alg,kw,size", [
    ("ring:8", "ring", {}, GIB),                                   # 64 runs
    ("switch:8", "ring", {"instances": 4}, 256 * MIB),             # 4 independent rings, 2 runs..
    ("switch:8", "ring", {"instances": 4}, GIB),                   # .. and 8
    ("torus:4x4", "swing", {}, GIB),
    ("ring:8", "ring", {"proto": Proto.LL128}, 64 * MIB),          # LL128: 576000-byte runs, 15 of them
])
def test_aggregated_runs_equal_every_run_simulated(spec: str, alg: str, kw: dict[str, object], size: int) -> None:
    # simulate_program simulates FIRST_RUNS runs and extrapolates once every tb's run times
    # repeat; trace_program simulates every run
    topo = parse_spec(spec)
    prog = compile_xml(topo, alg, CollKind.ALLREDUCE, inplace=True, **kw).program  # type: ignore[arg-type]
    agg = simulate_program(prog, topo, [size], alpha_us=5.0, hop_latency_us=0.3)[0].time_us
    exact = trace_program(prog, topo, size, alpha_us=5.0, hop_latency_us=0.3).time_us
    assert agg == pytest.approx(exact, rel=1e-9)

