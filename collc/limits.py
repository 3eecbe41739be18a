"""Hard limits of each runtime dialect (docs/runtime-model.md).

``executor`` is NCCL's MSCCL executor (Azure/msccl-executor-nccl), ``rccl`` is
RCCL's embedded copy (64 threadblocks per GPU, 128 channels), ``legacy`` the old
microsoft/msccl runtime (256 steps, 216 threadblocks, default maxBytes 128 MB).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from collc.errors import CollcError


class Dialect(str, Enum):
    EXECUTOR = "executor"
    RCCL = "rccl"
    LEGACY = "legacy"

    @classmethod
    def parse(cls, text: str) -> Dialect:
        for d in cls:
            if d.value == text:
                return d
        raise CollcError(f"unknown dialect {text!r} (choose executor, rccl or legacy)")


#: ``<algo>`` attributes each dialect's parser requires (the legacy runtime defaults the window).
REQUIRED_ALGO: dict[Dialect, tuple[str, ...]] = {
    Dialect.EXECUTOR: ("nchunksperloop", "nchannels", "ngpus", "proto", "coll", "minBytes", "maxBytes",
                       "inplace", "outofplace"),
    Dialect.RCCL: ("nchunksperloop", "nchannels", "ngpus", "proto", "coll", "minBytes", "maxBytes",
                   "inplace", "outofplace"),
    Dialect.LEGACY: ("nchunksperloop", "nchannels", "ngpus", "proto", "coll", "inplace"),
}

#: Highest tb id a dependency may name (``depid`` is an int8 on the device).
MAX_DEPID = 127

#: Most parser nodes one rank may need in every dialect (:func:`parser_nodes`).
MAX_PARSER_NODES = 4095


@dataclass(frozen=True)
class Limits:
    max_steps_per_tb: int
    max_tbs_per_gpu: int
    max_channels: int
    max_tbs_per_channel: int = 32
    max_cnt: int = 71
    max_depid: int = MAX_DEPID    # int8 on device
    max_offset: int = 32767       # int16 on device
    max_nodes_per_rank: int = MAX_PARSER_NODES   # parser nodes of one rank (parser_nodes); the load fails at 4096
    max_children: int = 1024      # <gpu> per <algo>, <tb> per <gpu>, <step> per <tb>
    max_attrs: int = 16
    max_fused_reduce: int = 16
    legacy_default_max_bytes: int = 1 << 27  # exclusive upper bound when maxBytes is absent


LIMITS: dict[Dialect, Limits] = {
    Dialect.EXECUTOR: Limits(max_steps_per_tb=64, max_tbs_per_gpu=1024, max_channels=32),
    Dialect.RCCL: Limits(max_steps_per_tb=64, max_tbs_per_gpu=64, max_channels=128),
    Dialect.LEGACY: Limits(max_steps_per_tb=256, max_tbs_per_gpu=216, max_channels=32),
}

def parser_nodes(gpus_in_file: int, tbs: int, steps: int) -> int:
    """The XML nodes that the runtimes' parser stores for one rank (MAX_NODES = 4096).

    The parser stores a node only for an element that a handler takes: the ``<algo>``,
    every ``<gpu>`` of the file whatever its id, and the ``<tb>`` and ``<step>``
    children of the rank's own ``<gpu>`` (nops included).  Other ranks' subtrees,
    unknown elements and comments are read into one reused slot; attributes cost no
    node.  Before every read it fails if 4096 nodes are stored, and a read always
    follows the last store, so :attr:`Limits.max_nodes_per_rank` (4095) is the most
    that loads.  ``gpus_in_file`` is ``ngpus`` for a single file and 1 for a per-rank
    shard.

    >>> parser_nodes(1, 1, 4092), parser_nodes(2, 1, 4092)
    (4095, 4096)
    """
    return 1 + gpus_in_file + tbs + steps


def connection_steps_per_tb(max_steps: int) -> int:
    """Steps of one connection that channel groups aim to keep in a tb: three quarters of the
    dialect's limit, leaving room for dependency nops and unfused pairs."""
    return max_steps * 3 // 4


# Runtime buffer geometry used to model slicing (docs/runtime-model.md; NCCL defaults).
NCCL_STEPS = 8
SIMPLE_BUFF = 1 << 22                      # 4 MiB
LL_BUFF = 8 * 512 * NCCL_STEPS * 16        # lines/thread * threads * steps * 16 B
LL128_BUFF = 120 * 640 * NCCL_STEPS * 8    # elems/thread * threads * steps * 8 B
