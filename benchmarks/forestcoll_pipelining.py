#!/usr/bin/env python3
"""ForestColl pipelining benchmark: does the emitted file follow its packing?

For every fabric and k of issue 29 (``k`` = auto, 2, 3, 4, opt) it builds the allgather
XML the way ``collc build`` does (``--chunks 1 --instances 1``, executor dialect, checked)
and reports, at 1 GiB:

* ``model``: the packing's congestion bound N k / U_k (GB/s);
* ``link``: the link-level bound of the emitted file: its bytes on every physical link
  (each send step's chunks over the route's links) over the link's bandwidth; the busiest
  link's time gives the algbw.  Equal to ``model`` when the lowering keeps the packing exact;
* ``event``: the event model's algbw of the file (``collc simulate``, alpha 5 us) and its
  fraction of ``model``;
* the layout (lanes, pieces -- coarsest-finest where the trees have their own, tbs per rank,
  steps per tb), the build's CPU seconds (forest search and packing included, simulation not);
* the verdict: ``ok`` at 90% of ``model`` or more; below, ``warned`` when the build printed its
  one-line warning (``LayoutWarning``), the limit that binds (the tbs a tb per tree and peer would
  need against the 64 allowed, or the channels) and k=auto's simulated figure on that fabric.

    python benchmarks/forestcoll_pipelining.py            # every case (a few minutes)
    python benchmarks/forestcoll_pipelining.py --quick    # a100:2x8 and mi250:8+8 only

Each case runs in a fresh process (the forest cache would otherwise hide the build time).
Results: docs/forestcoll.md, "Pipelining that follows the packing".
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FABRICS = ["a100:2x8", "mi250:2", "mi250:8+8", "a100:4x8", "a100:8x8"]
KS = ["auto", "2", "3", "4", "opt"]
SIZE = 1 << 30


def run_case(spec: str, k: str) -> dict[str, object]:
    import warnings

    from collc.check.runtime_model import F_SEND, FLAGS
    from collc.driver import compile_xml
    from collc.frontends.forestcoll import DEFAULT_MAXK, TB_BUDGET, forest, own_tbs
    from collc.ir.collective import CollKind
    from collc.sim.event import simulate_program
    from collc.sim.routing import Router
    from collc.topology import parse_spec

    topo = parse_spec(spec)
    t0 = time.process_time()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        result = compile_xml(topo, "forestcoll", CollKind.ALLGATHER, params={"k": k})
    build = time.process_time() - t0
    fo = forest(topo, k, DEFAULT_MAXK)
    prog = result.program
    event = simulate_program(prog, topo, [SIZE], alpha_us=5.0)[0].algbw
    router = Router(topo)
    chunk = SIZE / prog.nchunksperloop
    load: dict[tuple[int, int], float] = {}
    for g in prog.gpus:
        for tb in g.tbs:
            sends = sum(st.cnt for st in tb.steps if FLAGS[st.type] & F_SEND)
            if sends:
                for link, frac in router.shares(g.id, tb.send):
                    load[link] = load.get(link, 0.0) + frac * sends * chunk
    busiest = max(v / (router.capacity(lk) * 1e3) for lk, v in load.items())
    params = dict(result.schedule.provenance.params)
    return {"spec": spec, "k": k, "kk": fo.k, "trees": len(fo.trees), "model": float(fo.algbw),
            "link": SIZE / busiest / 1e3, "event": event, "lanes": int(params["lanes"]),
            "pieces": int(params["pieces"]), "tbs": max(len(g.tbs) for g in prog.gpus),
            "steps": max(len(t.steps) for g in prog.gpus for t in g.tbs), "ok": result.report.ok,
            "build": build, "warned": [str(w.message) for w in said], "need": own_tbs(fo.trees, fo.net.nranks),
            "budget": TB_BUDGET, "coarsest": int(params.get("coarsest", params["pieces"])),
            "finest": int(params.get("finest", params["pieces"]))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a100:2x8 and mi250:8+8 only")
    ap.add_argument("--case", nargs=2, metavar=("SPEC", "K"), help=argparse.SUPPRESS)   # one case, as JSON
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run_case(*args.case)))
        return 0
    fabrics = ["a100:2x8", "mi250:8+8"] if args.quick else FABRICS
    print("| fabric | k | trees | model GB/s | link GB/s | event GB/s | event/model | lanes | pieces | tbs | "
          "steps/tb | build CPU s | verdict |")   # pieces: coarsest-finest where trees differ
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    reasons: list[str] = []
    for spec in fabrics:
        auto: dict[str, object] = {}
        for k in KS:
            out = subprocess.run([sys.executable, __file__, "--case", spec, k], capture_output=True, text=True,
                                 cwd=ROOT)
            if out.returncode:
                print(f"| {spec} | {k} | failed: {out.stderr.strip().splitlines()[-1]} |")
                continue
            r = json.loads(out.stdout)
            frac = r["event"] / r["model"]
            auto = auto or r          # KS starts with auto: k=auto's row is the alternative named
            verdict = "ok" if frac >= 0.9 else ("warned" if r["warned"] else "BELOW, not warned")
            if frac < 0.9:
                # the limit that binds, as the build's warning names it, and k=auto's simulated figure
                bind = (f"{r['need']} tbs for one per tree and peer, {r['budget']} allowed"
                        if r["need"] > r["budget"] else f"{r['trees']} trees, 32 channels")
                best = (f"; k=auto (k={auto['kk']}) {auto['event']:.2f} GB/s "
                        f"({auto['event'] / auto['model'] * 100:.1f}%)" if auto is not r else "")
                cut = r["pieces"] if r["coarsest"] == r["finest"] else f"{r['coarsest']}-{r['finest']}"
                verdict = f"{verdict}, limit: {bind}, {cut} pieces in 48 steps/tb{best}"
            kk = k if k == str(r["kk"]) else f"{k} = {r['kk']}"
            print(f"| {spec} | {kk} | {r['trees']} | {r['model']:.2f} | {r['link']:.2f} | {r['event']:.2f} | "
                  f"{frac * 100:.1f}% | {r['lanes']} | "
                  f"{r['pieces'] if r['coarsest'] == r['finest'] else str(r['coarsest']) + '-' + str(r['finest'])} | "
                  f"{r['tbs']} | {r['steps']} | "
                  f"{r['build']:.2f} | {verdict}{'' if r['ok'] else ' (check failed)'} |", flush=True)
            reasons += [f"- {spec} k={kk}: {w}" for w in r["warned"]]
    if reasons:
        print("\nwhy (the build's warning, in the limits it names):")
        print("\n".join(reasons))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
