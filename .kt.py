import sys, time
from collc.driver import compile_xml
from collc.compiler.limits import Dialect
from collc.ir.collective import CollKind
from collc.topology import parse_spec
from collc.sim.lockstep import program_rounds, program_step_times
spec, alg, kind = sys.argv[1], sys.argv[2], CollKind.parse(sys.argv[3])
topo = parse_spec(spec)
for ip in (False, True):
  for d in (Dialect.EXECUTOR, Dialect.RCCL):
    t=time.time()
    c = compile_xml(topo, alg, kind, inplace=ip, dialect=d)
    rounds = program_rounds(c.program)
    print(spec, alg, kind.value, 'inplace' if ip else 'oop', d.value, 'ok' if c.report.ok else [e.message[:200] for e in c.report.errors()[:3]],
          'rounds', len([r for r in rounds if r]), 'maxcnt/round', [max(m[2] for m in r) for r in rounds if r], 'dup', any(len(set((a,b) for a,b,_ in r))!=len(r) for r in rounds), f'{time.time()-t:.1f}s')
