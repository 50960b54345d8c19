"""The shape of a tiled matmul candidate (:class:`MatmulTile`): its blocks, register tiles and
options, what it may combine, its name, and the grid a call of a given size gets.

Its WGSL is generated in :mod:`wgtune.kernels.matmul.wgsl` (the scalar layout) and
:mod:`wgtune.kernels.matmul.vector` (register tiles of vec4); how a tile that splits K cuts it, in
:mod:`wgtune.kernels.matmul.chunks`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..common import F32_BYTES, ceil_div, wrapped_grid
from .chunks import MAX_FLOAT_K_CHUNKS, MAX_K_CHUNKS, MIN_K_CHUNK, TAIL_MIN_K_CHUNK, k_chunks, wave_chunks

__all__ = ["HARD_MAX_INVOCATIONS", "HARD_MAX_STORAGE", "MatmulTile"]

# What no candidate goes past, whatever the device (most GPUs stop at 1024 invocations, 48-64 KiB).
# Candidates past WebGPU's default limits (wgtune.DeviceLimits()) declare what they need, and the
# core refuses them on a device with lower limits.
HARD_MAX_INVOCATIONS = 1024
HARD_MAX_STORAGE = 49152


@dataclass(frozen=True)
class MatmulTile:
    """The shape of a tiled candidate.

    A workgroup computes a ``bm x bn`` block of C in steps of ``bk`` along K; each invocation a
    ``tm x tn`` register tile, so the workgroup is ``(bn / tn, bm / tm)`` invocations.
    Register tiles that are multiples of 4 both ways get the vector layout, which takes the
    options: ``vec4`` global loads and stores, ``pad`` floats (0 or 4) at the end of each row of
    the transposed A tile, ``double`` buffering, and ``subgroup`` (A shared across quads with
    ``quadBroadcast`` instead of workgroup memory; needs ``bk == 16`` and ``bn / tn`` a multiple
    of 4, so that the four lanes of a quad own the same rows), ``swizzle`` (the order of the
    workgroups), ``kgrid``: K cut into chunks, one workgroup each along the grid's z, so that
    the grid has about ``kgrid`` workgroups (each adds its chunk's sums into C with atomics after
    a first stage zeroed C; f32 only), and ``slices``: that many sets of ``(bn / tn, bm / tm)``
    invocations (the workgroup's z) share each staged step of ``slices * bk`` along K, each
    computing its ``bk`` of it, and add their sums in workgroup memory at the end: more
    invocations for a block, with the same registers each. ``stagger`` (kgrid tiles, 2 or
    more): the chunks take their atomic adds in that many orders (rotations of one order, chunk
    ``z`` taking rotation ``z % stagger``): chunks of a block finish together, and in one order
    they would all queue on the same address of C at once. ``partials`` (kgrid tiles): the
    chunks write their sums into scratch and a second stage adds them into C
    (:mod:`wgtune.kernels.matmul.partials`), instead of zeroing C and adding with atomics.
    ``wave`` (kgrid tiles): the chunks are the fewest that keep whole waves of ``wave``
    workgroups busy (:func:`~wgtune.kernels.matmul.chunks.wave_chunks`), up to what the
    ``kgrid`` target allows, rather than as many as it allows: for a tile that runs one
    workgroup an SM, the SMs of the device (132 on an H200; elsewhere the same kernel on another
    grid, which the tune weighs as any other).
    ``chunk`` (kgrid tiles): the shortest K chunk, in place of ``chunks.MIN_K_CHUNK``: a grid of
    few blocks and a K of a thousand or two gets a few chunks of MIN_K_CHUNK, too few workgroups
    for a large GPU; shorter chunks give more (the same WGSL: the grid's z changes, and with
    ``partials`` the scratch and the reduce stage follow it). The WGSL rounds each chunk up to
    whole K steps, so a ``chunk`` under ``bk * slices`` leaves the last chunks empty.
    ``tail``: the blocks of C that fill whole waves of ``tail`` workgroups each take
    all of K, and only the blocks of the last, partial wave are cut into K chunks (as ``wave``
    cuts them, in chunks of at least ``chunks.TAIL_MIN_K_CHUNK``), so that the launch ends in
    about a full wave where the blocks alone would leave most of its last wave idle; a
    data-parallel grid with a split-K tail, the simplest form of stream-K (f32: after a stage
    that zeroed the cut blocks' rows of C (:meth:`zeroed`; none where no block is cut) they add
    their sums into it, with ``float_atomics`` or compare-exchange, and the whole ones store
    theirs). Its grid is one run of workgroups (wrapped onto y, the chunks on z); ``tail`` is the
    device's concurrent workgroups of the tile, which WebGPU does not report: candidates carry
    guesses and the tune weighs them (the tile stage reads it from its own params, so a tile's
    guesses share one WGSL).
    ``ahead``: how many K steps ahead the global loads are issued (1, or 2 with ``double``: a
    second set of prefetch registers, for loads whose latency one step's arithmetic does not hide).
    ``rolled`` (vector layout): the K step's ``bk`` rows of multiply-adds run as a WGSL loop of
    ``bk / rolled`` turns, ``rolled`` rows unrolled a turn, its bound a uniform (``p.steps``) so
    that the driver cannot unroll it back: fully unrolled code leaves the driver free to issue
    every row's workgroup-memory reads at once, which may take registers enough to cut the
    workgroups an SM runs (an H200 ran one 96x64 or 128x128 workgroup an SM); 0, fully unrolled.
    ``strided`` (flat loads, no ``vec4``): each of an invocation's vec4 accumulators holds four
    columns ``bn / tn`` apart rather than four neighbours, so that a warp's scalar stores (or atomic
    adds) of one lane reach consecutive addresses of C, whole memory sectors, where neighbours
    would have each store touch a quarter of four times the sectors (the flat loads stage the B
    tile's columns in that order, at no cost to them).
    ``copy`` (vec4 tiles): ``"a"``, ``"b"`` or ``"ab"``, the operands a first stage copies into
    scratch whose rows start on a vec4 (:mod:`wgtune.kernels.matmul.padded`): for K (A) or N (B
    and C) no multiple of 4, which vec4 loads of the call's own buffers cannot serve (a kgrid tile
    adds into C one float at a time: only with float_atomics, whose adds any N allows); ``"c"``
    with ``"b"``: the tile stores into an aligned copy of C, which a last stage copies into C.
    """

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    vec4: bool = False
    pad: int = 0
    double: bool = False
    subgroup: bool = False
    swizzle: int = 0
    kgrid: int = 0
    slices: int = 1
    stagger: int = 0
    float_atomics: bool = False
    partials: bool = False
    ahead: int = 1
    copy: str = ""
    wave: int = 0
    tail: int = 0
    rolled: int = 0
    strided: bool = False
    chunk: int = 0

    def __post_init__(self) -> None:
        if self.copy not in ("", "a", "b", "ab", "bc", "abc") or (self.copy and (
                not self.vec4 or self.subgroup or (self.splits_k and ("c" in self.copy or not self.float_atomics)))):
            raise ValueError(f"{self}: copy is '', 'a', 'b', 'ab', 'bc' or 'abc', for vec4 tiles without subgroup "
                             "(with kgrid: float_atomics, no 'c')")
        if self.float_atomics and not self.splits_k:
            raise ValueError(f"{self}: float_atomics are for the adds of kgrid or tail")
        if self.ahead not in (1, 2) or (self.ahead == 2 and (not self.double or self.subgroup)):
            raise ValueError(f"{self}: ahead is 1 or 2 K steps, and 2 needs double buffering without subgroup")
        if self.partials and (not self.kgrid or self.float_atomics or self.stagger):
            raise ValueError(f"{self}: partials need kgrid, and take no atomics (float_atomics, stagger)")
        if min(self.bm, self.bn, self.bk, self.tm, self.tn) < 1:
            raise ValueError(f"{self}: every tile size must be >= 1")
        if self.bm % self.tm or self.bn % self.tn:
            raise ValueError(f"{self}: the block tile must be a multiple of the register tile")
        options = self.vec4 or self.pad or self.double or self.subgroup
        if options and not self.vector:
            raise ValueError(f"{self}: vec4, pad, double and subgroup need a register tile of multiples of 4")
        if self.vector and self.bk % 4:
            raise ValueError(f"{self}: the vector layout needs a K step that is a multiple of 4")
        if self.pad not in (0, 4):
            raise ValueError(f"{self}: pad must be 0 or 4 floats")
        if self.swizzle < 0 or (self.swizzle and not self.vector):
            raise ValueError(f"{self}: swizzle must be >= 0 and needs the vector layout")
        if self.kgrid < 0 or (self.kgrid and not self.vector):
            raise ValueError(f"{self}: kgrid must be >= 0 and needs the vector layout")
        if self.wave < 0 or (self.wave and not self.kgrid):
            raise ValueError(f"{self}: wave must be >= 0, and needs kgrid")
        if self.chunk < 0 or (self.chunk and not self.kgrid):
            raise ValueError(f"{self}: chunk must be >= 0, and needs kgrid")
        if self.tail < 0 or (self.tail and (self.kgrid or self.partials or self.stagger or self.copy or self.swizzle
                                            or not self.vector)):
            raise ValueError(f"{self}: tail must be >= 0, and needs the vector layout without kgrid (it splits K its "
                             "own way), partials, stagger, copy or swizzle")
        if self.rolled < 0 or (self.rolled and (not self.vector or self.subgroup or self.tail or self.copy
                                                or self.bk % self.rolled)):
            raise ValueError(f"{self}: rolled must be >= 0 and divide bk, and needs the vector layout without "
                             "subgroup, tail or copy (their stages' params have no room for its bound)")
        if self.strided and (not self.vector or self.vec4):
            raise ValueError(f"{self}: strided is for the vector layout's flat loads (a register tile of multiples "
                             "of 4, no vec4)")
        if self.stagger and (self.stagger < 2 or not self.kgrid):
            raise ValueError(f"{self}: stagger must be 0 or >= 2, and needs kgrid")
        if self.slices < 1 or (self.slices > 1 and (not self.vector or self.subgroup)):
            raise ValueError(f"{self}: slices must be >= 1 and need the vector layout without subgroup")
        if (self.slices - 1) * self.workgroup_shape[1] > self.slices * self.bk:
            # The slices' sums meet in the B tile, a register row of each slice at least at a time.
            raise ValueError(f"{self}: (slices - 1) * bm / tm must be at most slices * bk")
        if self.subgroup and (self.bk != 16 or self.workgroup_shape[0] % 4 or self.pad or not self.vec4):
            raise ValueError(f"{self}: subgroup needs vec4, bk == 16, bn / tn a multiple of 4 and no A tile to pad")
        if self.invocations > HARD_MAX_INVOCATIONS:
            raise ValueError(f"{self}: {self.invocations} invocations, more than {HARD_MAX_INVOCATIONS}")
        if self.workgroup_storage > HARD_MAX_STORAGE:
            raise ValueError(
                f"{self}: {self.workgroup_storage} bytes of workgroup storage, more than {HARD_MAX_STORAGE}"
            )

    @property
    def vector(self) -> bool:
        """Whether the register tile is made of vec4 (both sides multiples of 4)."""
        return self.tm % 4 == 0 and self.tn % 4 == 0

    @property
    def splits_k(self) -> bool:
        """Whether workgroups share blocks of C, each summing a chunk of K (``kgrid`` or
        ``tail``): the sums are added into C after a stage that zeroed it (or, with
        ``partials``, summed by a last stage)."""
        return bool(self.kgrid or self.tail)

    @property
    def workgroup_shape(self) -> tuple[int, int]:
        """Invocations along N and along M: ``(bn / tn, bm / tm)``."""
        return (self.bn // self.tn, self.bm // self.tm)

    @property
    def workgroup_size(self) -> tuple[int, int, int]:
        """The shape, flattened to one dimension with subgroup (naga allows
        ``subgroup_invocation_id`` only in one-dimensional workgroups)."""
        wx, wy = self.workgroup_shape
        return (wx * wy, 1, 1) if self.subgroup else (wx, wy, self.slices)

    @property
    def invocations(self) -> int:
        return (self.bn // self.tn) * (self.bm // self.tm) * self.slices

    @property
    def k_step(self) -> int:
        """K staged per step: ``bk`` for each slice."""
        return self.bk * self.slices

    @property
    def workgroup_storage(self) -> int:
        """Bytes of the staged tiles: A is ``k_step x (bm + pad)`` (none with subgroup), B
        ``k_step x bn``; twice that when double buffered. Always f32, whatever the buffers' type."""
        a_tile = 0 if self.subgroup else self.k_step * (self.bm + self.pad)
        return F32_BYTES * (2 if self.double else 1) * (a_tile + self.k_step * self.bn)


    @property
    def name(self) -> str:
        name = f"tile{self.bm}x{self.bn}_k{self.bk}_reg{self.tm}x{self.tn}"
        for flag, suffix in ((self.vec4, "_v4"), (self.pad, "_pad"), (self.double, "_db"), (self.ahead == 2, "_a2"),
                             (self.subgroup, "_sg")):
            if flag:
                name += suffix
        if self.swizzle:
            name += f"_sw{self.swizzle}"
        if self.slices > 1:
            name += f"_s{self.slices}"
        if self.rolled:
            name += f"_r{self.rolled}"
        if self.strided:
            name += "_sc"
        if self.kgrid:
            name += f"_kg{self.kgrid}"
        if self.chunk:
            name += f"_kc{self.chunk}"
        if self.wave:
            name += f"_w{self.wave}"
        if self.tail:
            name += f"_t{self.tail}"
        if self.stagger:
            name += f"_st{self.stagger}"
        if self.float_atomics:
            name += "_fa"
        if self.partials:
            name += "_2p"
        if self.copy:
            name += f"_c{self.copy}"
        return name

    @property
    def steps(self) -> int:
        """The turns of a ``rolled`` tile's loop over a K step (its stage's ``p.steps``)."""
        return self.bk // self.rolled if self.rolled else 0

    def blocks(self, m: int, n: int) -> tuple[int, int]:
        """The blocks of C of an ``m x n`` call: ``(across, down)``."""
        return ceil_div(n, self.bn), ceil_div(m, self.bm)

    def chunks(self, m: int, n: int, k: int) -> int:
        """K chunks (the grid's z) for an ``m x n x k`` call: 1 unless ``kgrid`` or ``tail``."""
        cols, rows = self.blocks(m, n)
        blocks = cols * rows
        most = MAX_FLOAT_K_CHUNKS if self.float_atomics or self.partials else MAX_K_CHUNKS
        if self.tail:  # only the last wave's blocks are cut, as many chunks as fill it
            left = blocks % self.tail
            return wave_chunks(left, self.tail, min(most, ceil_div(k, TAIL_MIN_K_CHUNK))) if left else 1
        chunks = k_chunks(self.kgrid, blocks, k, most, self.chunk or MIN_K_CHUNK)
        return wave_chunks(blocks, self.wave, chunks) if self.wave else chunks

    def zeroed(self, m: int, n: int, k: int) -> int:
        """How many elements of C, counted back from its end, the stage before a tile that adds
        into C zeroes for an ``m x n x k`` call: all of C, but with ``tail`` only the rows from the
        first cut block's down (none where no block is cut): the whole blocks store their sums."""
        if not self.tail:
            return m * n
        if self.chunks(m, n, k) == 1:
            return 0
        cols, rows = self.blocks(m, n)
        first_cut = cols * rows - cols * rows % self.tail
        return (m - first_cut // cols * self.bm) * n

    def grid(self, m: int, n: int, k: int) -> tuple[int, int, int]:
        """The grid of an ``m x n x k`` call: ``(ceil(N / bn), ceil(M / bm), K chunks)``; with
        ``tail``, the blocks that take all of K then the last wave's chunks, one run of workgroups
        numbered ``(wid.z * groups.y + wid.y) * groups.x + wid.x`` with the chunks on z."""
        (cols, rows), chunks = self.blocks(m, n), self.chunks(m, n, k)
        if not self.tail:
            return (cols, rows, chunks)
        blocks = cols * rows  # and each of the last wave's takes chunks - 1 more workgroups
        across, down, _ = wrapped_grid(ceil_div(blocks + blocks % self.tail * (chunks - 1), chunks))
        return (across, down, chunks)
