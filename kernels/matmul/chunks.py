"""How candidates that split K over workgroups (kgrid tiles, split skinny kernels) cut it: how
many K chunks, one workgroup each along the grid's z, a call of a given size gets.

Each chunk adds its sums into C (atomics after a stage that zeroed C, or partial sums a second
stage adds), so chunks cost adds and a stage; they pay where the blocks of C alone leave the GPU
idle. :func:`k_chunks` aims at a number of workgroups; :func:`wave_chunks` at whole waves of them.
"""

from __future__ import annotations

from ..common import ceil_div

__all__ = [
    "MAX_FLOAT_K_CHUNKS", "MAX_K_CHUNKS", "MIN_K_CHUNK", "TAIL_MIN_K_CHUNK", "WAVE_FILL", "k_chunks", "wave_chunks",
]

# The shortest K chunk a candidate that splits K over workgroups (kgrid tiles, split skinny
# kernels) gives one workgroup, unless it sets its own (``MatmulTile.chunk``): shorter, zeroing C
# and the atomic adds would cost more than the K loop they split.
MIN_K_CHUNK = 256
# The shortest K chunk of a tail tile's cut blocks (``MatmulTile.tail``): only the last wave's
# blocks are cut and only their rows of C zeroed, so shorter chunks cost less than they do to a
# kgrid tile, and at a K of 129-256 (many blocks, a last wave mostly idle) chunks of 256 would cut
# nothing. A hypothesis for the probes (bench/probes/short-k.txt), not yet measured.
TAIL_MIN_K_CHUNK = 64
# The most K chunks of such a candidate: each output of C takes
# one atomic add per chunk, and adds to one address wait on one another (on an H200, 256 chunks
# of a 64x64 output spent most of their time there).
MAX_K_CHUNKS = 64

# The most K chunks with the device's float atomics (one hardware add each: adds to one address
# wait far less than compare-exchange loops, so more chunks pay) or with partial sums (no atomics).
MAX_FLOAT_K_CHUNKS = 256


def k_chunks(target: int, blocks: int, k: int, most: int = MAX_K_CHUNKS, shortest: int = MIN_K_CHUNK) -> int:
    """K chunks (workgroups along the grid's z) of a candidate that splits K over about
    ``target`` workgroups, for ``blocks`` blocks of C and a K of ``k``: no more than chunks of
    ``shortest`` (MIN_K_CHUNK unless the candidate says) would make, at most ``most``, and 1 for a
    candidate that does not split (``target`` 0)."""
    if not target:
        return 1
    return max(1, min(target // max(1, blocks), ceil_div(k, shortest), most))


# The share of its waves' workgroup slots (workgroups over waves x wave) a grid must keep busy
# for ``wave_chunks`` to take its number of K chunks (on an H200 the best chunks a 128x128 tile
# was probed with filled 91-100%).
WAVE_FILL = 0.92


def wave_chunks(blocks: int, wave: int, most: int) -> int:
    """The fewest K chunks (1 to ``most``) whose ``blocks * chunks`` workgroups keep waves of
    ``wave`` workgroups at least WAVE_FILL busy, else the chunks that fill them best: a grid of
    105 blocks on 132 SMs is 80% busy unsplit and in 2 to 4 chunks, 99% in 5."""
    def fill(chunks: int) -> float:
        workgroups = blocks * chunks
        return workgroups / (ceil_div(workgroups, wave) * wave)

    choices = range(1, max(1, most) + 1)
    return next((chunks for chunks in choices if fill(chunks) >= WAVE_FILL), max(choices, key=fill))
