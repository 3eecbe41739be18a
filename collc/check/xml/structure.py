"""Per-gpu, per-tb and per-step rules (codes ``structure``, ``limit``, ``dependency``,
``attribute``): tb ids, one tb per connection, peers, channels, buffers and offsets in range,
``s`` equal to the position, dependency targets and the parser's chain rule, and every hard
limit of the dialect (docs/runtime-model.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from collc.check.findings import MAX_LISTED, Loc, Report
from collc.arrays import unique
from collc.check.xml.opstream import BAD_BUFFER, OP_FLAGS, TYPES, OpStream
from collc.check.runtime_model import F_RECV, F_SEND
from collc.limits import LIMITS, Dialect, Limits, parser_nodes
from collc.compiler.msccl.program import READS_SRC, WRITES_DST, Gpu, Program, StepType, Threadblock

_NOP = TYPES.index(StepType.NOP)
_READS = np.array([t in READS_SRC for t in TYPES])
_WRITES = np.array([t in WRITES_DST for t in TYPES])


def suspect_tbs(p: Program, ops: OpStream, lim: Limits) -> np.ndarray | None:
    """Per tb (op-stream index): may one of its steps break a per-step rule?  A superset of
    the tbs that ``_check_steps`` reports on, computed over the arrays; None (check every tb)
    when a gpu's tb ids are not unique, since dependency targets are then ambiguous."""
    nt = ops.ntbs
    if nt == 0 or len(ops.op) == 0:
        return np.zeros(nt, dtype=bool)
    gpu_row = np.zeros(nt, dtype=np.int64)
    sizes = np.zeros((len(p.gpus), BAD_BUFFER + 1), dtype=np.int64)
    first = 0
    for row, g in enumerate(p.gpus):
        gpu_row[first:first + len(g.tbs)] = row
        first += len(g.tbs)
        sizes[row, :BAD_BUFFER] = (g.i_chunks, g.o_chunks, g.s_chunks)
    span = int(max(ops.tb_id.max(), 0)) + 1
    key = gpu_row * span + ops.tb_id
    order = np.argsort(key, kind="stable")
    if np.any(key[order][1:] == key[order][:-1]) or ops.tb_id.min() < 0:
        return None
    sorted_key, tb_steps = key[order], np.diff(ops.tb_start)
    out = np.zeros(nt, dtype=bool)
    total = int(ops.tb_start[-1])
    # rows in batches of whole tbs (about 2^20 rows each: bounded temporaries at 4096 ranks)
    cuts = unique(ops.tb_start[np.searchsorted(ops.tb_start, np.arange(0, total, 1 << 20), side="right") - 1])
    for r0, r1 in zip(cuts.tolist(), cuts[1:].tolist() + [total]):
        rows = slice(r0, r1)
        tb, op, cnt = ops.tb[rows], ops.op[rows], ops.count[rows]
        srcbuf_, dstbuf_, srcoff_, dstoff_ = ops.srcbuf[rows], ops.dstbuf[rows], ops.srcoff[rows], ops.dstoff[rows]
        depid_, deps_, hasdep_ = ops.depid[rows], ops.deps[rows], ops.hasdep[rows]
        flags = OP_FLAGS[op]
        nop = op == _NOP
        real = ~nop
        grow = gpu_row[tb]
        bad = ops.s[rows] != ops.step[rows]
        bad |= (srcbuf_ == BAD_BUFFER) | (dstbuf_ == BAD_BUFFER)
        bad |= (cnt > lim.max_cnt) | (cnt < 0) | (real & (cnt < 1))
        bad |= ((flags & F_SEND) != 0) & (ops.tb_send[tb] < 0)
        bad |= ((flags & F_RECV) != 0) & (ops.tb_recv[tb] < 0)
        for buf, off, used in ((srcbuf_, srcoff_, _READS[op]), (dstbuf_, dstoff_, _WRITES[op])):
            size = sizes[grow, np.minimum(buf, BAD_BUFFER)]
            bad |= real & used & ((off > lim.max_offset) | (off < 0) | (off + cnt > size))
        dep = depid_ >= 0
        bad |= (depid_ < -1) | (hasdep_ < 0) | (hasdep_ > 1) | (nop & ~dep)
        # a real step without a dependency right after a nop (the parser's chain rule)
        after_nop = np.zeros(len(op), dtype=bool)
        after_nop[1:] = nop[:-1] & (tb[1:] == tb[:-1])
        bad |= real & ~dep & after_nop
        # dependency targets: the tb of that id on the same gpu, its step count and the flag
        want = grow * span + np.clip(depid_, 0, span - 1)
        pos = np.minimum(np.searchsorted(sorted_key, want), nt - 1)
        target = order[pos]
        found = dep & (depid_ < span) & (key[target] == want)
        nsteps = tb_steps[target]
        in_range = found & (deps_ >= 0) & (deps_ < nsteps)
        flag_row = np.where(in_range, ops.tb_start[target] + np.clip(deps_, 0, None), 0)
        bad |= dep & ((depid_ > lim.max_depid) | ~in_range | (depid_ == ops.tb_id[tb]) |
                      (ops.hasdep[flag_row] != 1))
        out[tb[bad]] = True
    return out


def check_structure(p: Program, dialect: Dialect, rep: Report, sharded: bool, ops: OpStream | None = None) -> bool:
    """Per-gpu, per-tb and per-step rules; returns False when simulation is unsafe.

    ``sharded``: the program was assembled from per-rank files holding one ``<gpu>`` each.
    ``ops``: its op stream; the per-step rules then run, to explain, only on the tbs that a
    vectorized test over the arrays flags (:func:`suspect_tbs`).
    """
    lim = LIMITS[dialect]
    suspect = suspect_tbs(p, ops, lim) if ops is not None else None
    k = -1
    gpus_per_file = 1 if sharded else len(p.gpus)
    fatal = check_ranks(p.ngpus, [g.id for g in p.gpus], gpus_per_file, dialect, rep)
    flagged = suspect_gpus(p, ops, dialect, gpus_per_file) if ops is not None else None
    for row, g in enumerate(p.gpus):
        if flagged is not None and suspect is not None and not flagged[row] and \
                not suspect[k + 1:k + 1 + len(g.tbs)].any():
            k += len(g.tbs)         # nothing to report here (suspect_gpus, suspect_tbs)
            continue
        heads = [(t.id, t.send, t.recv, t.chan, len(t.steps)) for t in g.tbs]
        by_id = {t.id: t for t in g.tbs}
        sizes = {"i": g.i_chunks, "o": g.o_chunks, "s": g.s_chunks}

        def steps_fatal(i: int, g: Gpu = g, by_id: dict[int, Threadblock] = by_id,
                        sizes: dict[str, int] = sizes) -> bool:
            nonlocal k
            k += 1
            if suspect is None or suspect[k]:
                return _check_steps(p, g.id, g.tbs[i], by_id, sizes, lim.max_cnt, lim.max_depid, lim.max_offset,
                                    rep)
            return False

        fatal |= check_gpu(p.ngpus, p.nchannels, g.id, sizes, heads, dialect, gpus_per_file, rep, steps_fatal)
    return not fatal


def _repeats(*keys: np.ndarray) -> np.ndarray:
    """Per row: does another row have the same values in every one of ``keys``?"""
    n = len(keys[0])
    out = np.zeros(n, dtype=bool)
    if n < 2:
        return out
    order = np.lexsort(keys[::-1])
    same = np.ones(n - 1, dtype=bool)
    for key in keys:
        k = key[order]
        same &= k[1:] == k[:-1]
    out[order[1:][same]] = True
    out[order[:-1][same]] = True
    return out


def suspect_gpus(p: Program, ops: OpStream, dialect: Dialect, gpus_per_file: int) -> np.ndarray:
    """Per gpu (by position in ``p.gpus``): may :func:`check_gpu`'s own rules (not the per-step
    ones) report on it?  A superset, over the op stream's tb arrays: a gpu that is not flagged
    and has no suspect tb (:func:`suspect_tbs`) gets no finding, and its rules need not run."""
    lim = LIMITS[dialect]
    ng = len(p.gpus)
    ntb = np.array([len(g.tbs) for g in p.gpus], dtype=np.int64)
    gid = np.array([g.id for g in p.gpus], dtype=np.int64)
    least = np.array([min(g.i_chunks, g.o_chunks, g.s_chunks) for g in p.gpus], dtype=np.int64)
    row = np.repeat(np.arange(ng, dtype=np.int64), ntb)
    nsteps = np.diff(ops.tb_start)
    steps = np.bincount(row, weights=nsteps, minlength=ng) if len(row) else np.zeros(ng)
    bad = (least < 0) | (ntb > lim.max_tbs_per_gpu)
    bad |= 1 + gpus_per_file + ntb + steps.astype(np.int64) > lim.max_nodes_per_rank
    tid, send, recv, chan = ops.tb_id, ops.tb_send, ops.tb_recv, ops.tb_chan
    # ids 0..n-1, each once: all inside the range and no repeat
    tb_bad = (tid < 0) | (tid >= ntb[row]) | _repeats(row, tid)
    for peer in (send, recv):
        tb_bad |= (peer < -1) | (peer == gid[row]) | (peer >= p.ngpus)
    tb_bad |= (chan < 0) | (chan >= max(p.nchannels, 1)) | (nsteps > lim.max_steps_per_tb)
    for peer in (send, recv):
        used = peer >= 0
        r, c, q = row[used], chan[used], peer[used]
        tb_bad[np.flatnonzero(used)[_repeats(r, q, c)]] = True      # two tbs on one connection
        # distinct peers per (gpu, chan) in one direction
        if len(r):
            order = np.lexsort((q, c, r))
            r, c, q = r[order], c[order], q[order]
            new = np.ones(len(r), dtype=bool)
            new[1:] = (r[1:] != r[:-1]) | (c[1:] != c[:-1]) | (q[1:] != q[:-1])
            r, c = r[new], c[new]
            group = np.ones(len(r), dtype=bool)
            group[1:] = (r[1:] != r[:-1]) | (c[1:] != c[:-1])
            starts = np.flatnonzero(group)
            counts = np.diff(np.append(starts, len(r)))
            bad[r[starts][counts > lim.max_tbs_per_channel]] = True
    bad[row[tb_bad]] = True
    out: np.ndarray = bad
    return out


def check_ranks(ngpus: int, ids: Sequence[int], gpus_per_file: int, dialect: Dialect, rep: Report) -> bool:
    """The rules on the set of ``<gpu>`` ids (``ids`` in document order); True when one is fatal."""
    lim = LIMITS[dialect]
    fatal = False
    if gpus_per_file > lim.max_children:
        rep.add("limit", f"{len(ids)} <gpu> elements in one file: the parser stores at most "
                         f"{lim.max_children} children and overflows memory beyond (use --shard-per-rank)")
    if len(set(ids)) != len(ids):
        rep.add("structure", "a <gpu> id appears twice")
        fatal = True
    missing = sorted(set(range(ngpus)) - set(ids))
    if missing:
        rep.add("structure", f"ranks without a <gpu> element: {missing[:MAX_LISTED]} (they would run no tbs)")
        fatal = True
    if any(not 0 <= i < ngpus for i in ids):
        rep.add("structure", f"a <gpu> id is outside 0..{ngpus - 1}")
        fatal = True
    return fatal


def check_gpu(ngpus: int, nchannels: int, gid: int, sizes: dict[str, int],
              tbs: Sequence[tuple[int, int, int, int, int]], dialect: Dialect, gpus_per_file: int, rep: Report,
              steps_fatal: Callable[[int], bool]) -> bool:
    """The rules of one ``<gpu>`` (its tbs as (id, send, recv, chan, steps)); True when one is
    fatal.  ``steps_fatal(i)`` runs the per-step rules of the ``i``-th tb, in order, between
    that tb's own rules, so that the findings come in document order.  Needs only the header
    of the program (``ngpus``, ``nchannels``): a worker checking one shard runs it as it is."""
    lim = LIMITS[dialect]
    fatal = False
    where = f"gpu {gid}"
    if min(sizes.values()) < 0:
        rep.add("structure", f"{where}: negative chunk count")
        fatal = True
    tb_ids = sorted(t[0] for t in tbs)
    if tb_ids != list(range(len(tbs))):
        rep.add("structure", f"{where}: tb ids must be unique and contiguous from 0, got {tb_ids[:MAX_LISTED]}")
        fatal = True
    if len(tbs) > lim.max_tbs_per_gpu:
        rep.add("limit", f"{where}: {len(tbs)} tbs exceed the {dialect.value} limit of "
                         f"{lim.max_tbs_per_gpu} per GPU")
    nodes = parser_nodes(gpus_per_file, len(tbs), sum(t[4] for t in tbs))
    if nodes > lim.max_nodes_per_rank:
        rep.add("limit", f"{where}: {nodes} parser nodes for this rank (<algo>, {gpus_per_file} <gpu>, its "
                         f"<tb> and <step>); the runtime's parser loads at most {lim.max_nodes_per_rank}")
    send_use: dict[tuple[int, int], int] = {}
    recv_use: dict[tuple[int, int], int] = {}
    per_chan_send: dict[int, set[int]] = {}
    per_chan_recv: dict[int, set[int]] = {}
    for i, (tid, send, recv, chan, nsteps) in enumerate(tbs):
        tw = f"{where} tb {tid}"
        for role, peer in (("send", send), ("recv", recv)):
            if peer < -1 or peer == gid or peer >= ngpus:
                rep.add("structure", f"{tw}: {role} peer {peer} is invalid (must be -1 or another rank "
                                     f"below {ngpus})")
                fatal = True
        if not 0 <= chan < max(nchannels, 1):
            rep.add("structure", f"{tw}: chan {chan} is outside 0..{nchannels - 1} (nchannels)")
            fatal = True
        for peer, use, per_chan, verb in ((send, send_use, per_chan_send, "send to"),
                                          (recv, recv_use, per_chan_recv, "receive from")):
            if peer < 0:
                continue
            key = (peer, chan)
            if key in use:
                rep.add("structure", f"{where}: tbs {use[key]} and {tid} both {verb} {peer} on "
                                     f"chan {chan}; they would share one connection")
                fatal = True
            use[key] = tid
            per_chan.setdefault(chan, set()).add(peer)
        if nsteps > lim.max_steps_per_tb:
            rep.add("limit", f"{tw}: {nsteps} steps exceed the {dialect.value} limit of "
                             f"{lim.max_steps_per_tb} per tb (nops included)")
        fatal |= steps_fatal(i)
    for chan, peers in list(per_chan_send.items()) + list(per_chan_recv.items()):
        if len(peers) > lim.max_tbs_per_channel:
            rep.add("limit", f"{where}: chan {chan} has {len(peers)} peers in one direction; the runtime "
                             f"allows {lim.max_tbs_per_channel} tbs per channel")
    return fatal


def _check_steps(p: Program, gid: int, t: Threadblock, by_id: dict[int, Threadblock], sizes: dict[str, int],
                 max_cnt: int, max_depid: int, max_offset: int, rep: Report) -> bool:
    fatal = False
    tw = f"gpu {gid} tb {t.id}"
    pending = 0
    for pos, st in enumerate(t.steps):
        sw = Loc(tw, pos)
        if st.s != pos:
            rep.add("structure", f"{sw}: s=\"{st.s}\" but the step is at position {pos}; the runtime counts "
                                 f"document order, so deps referring to it would be off")
        if st.srcbuf not in sizes or st.dstbuf not in sizes:
            rep.add("structure", f"{sw}: buffers must be i, o or s (got {st.srcbuf}, {st.dstbuf})")
            fatal = True
            continue
        real = st.type is not StepType.NOP
        if real and not 1 <= st.cnt <= max_cnt:
            rep.add("limit", f"{sw}: cnt={st.cnt} must be in 1..{max_cnt}")
            fatal = st.cnt < 1 or fatal
        elif not 0 <= st.cnt <= max_cnt:
            rep.add("limit", f"{sw}: cnt={st.cnt} must be in 0..{max_cnt}")
        if st.type.sends and t.send < 0:
            rep.add("structure", f"{sw}: a {st.type.value} step in a tb with send=-1")
            fatal = True
        if st.type.receives and t.recv < 0:
            rep.add("structure", f"{sw}: a {st.type.value} step in a tb with recv=-1")
            fatal = True
        if real:
            for use, buf, off in (("src", st.srcbuf, st.srcoff), ("dst", st.dstbuf, st.dstoff)):
                used = st.type.reads_src if use == "src" else st.type.writes_dst
                if not used:
                    continue
                if off > max_offset:
                    rep.add("limit", f"{sw}: {use}off={off} exceeds the int16 limit {max_offset}")
                if off < 0 or off + st.cnt > sizes[buf]:
                    rep.add("structure", f"{sw}: {use} {buf}[{off}:{off + st.cnt}] is outside the "
                                         f"{sizes[buf]} chunks of buffer {buf}")
                    fatal = True
        if st.depid >= 0:
            target = by_id.get(st.depid)
            if st.depid > max_depid:
                rep.add("limit", f"{sw}: depid={st.depid} exceeds {max_depid} (stored as int8)")
            if target is None:
                rep.add("dependency", f"{sw}: depends on tb {st.depid}, which does not exist")
                fatal = True
            elif st.depid == t.id:
                rep.add("dependency", f"{sw}: depends on its own tb (program order already holds)", "warning")
            elif not 0 <= st.deps < len(target.steps):
                rep.add("dependency", f"{sw}: depends on step {st.deps} of tb {st.depid}, which has "
                                      f"{len(target.steps)} steps")
                fatal = True
            elif not target.steps[st.deps].hasdep:
                rep.add("dependency", f"{sw}: depends on gpu {gid} tb {st.depid} step {st.deps}, which lacks "
                                      f'hasdep="1": its flag is never published, so the wait hangs or '
                                      f"relies on a later step")
        elif st.depid != -1:
            rep.add("dependency", f"{sw}: depid={st.depid} is invalid")
        if st.hasdep not in (0, 1):
            rep.add("attribute", f"{sw}: hasdep must be 0 or 1, got {st.hasdep}")
        if not real:
            if st.depid < 0:
                rep.add("dependency", f"{sw}: a nop without a dependency is dropped by the parser but still "
                                      f"takes an index, shifting the step counter")
            else:
                pending += 1
        else:
            if pending and st.depid < 0:
                rep.add("dependency", f"{sw}: nops before this step carry dependencies but the step itself "
                                      f"has none; the runtime rejects the file (\"when there is a chain of "
                                      f"dependencies, the last reduction must be a part of the first "
                                      f"immediate instruction\")")
            pending = 0
    return fatal
