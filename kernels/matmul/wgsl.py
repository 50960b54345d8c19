"""The matmul family's tile shapes and WGSL: the naive kernel and the scalar layout.

The sets are in :mod:`wgtune.kernels.matmul`; the vector layout, for register tiles that are
multiples of 4, in :mod:`wgtune.kernels.matmul.vector`, which builds on the pieces here
(:func:`header`, :func:`widen`, :func:`narrow`, :func:`indent`).

``C[M, N] = A[M, K] @ B[K, N]``, all row-major; buffers ``(A, B, C)`` at bindings 0, 1, 2, params
``(M, N, K)`` as a uniform at binding 3. Every generated kernel handles any sizes: loads outside
the matrices read zero, stores outside ``C`` are skipped. The element type of the buffers is
``f32`` or ``f16`` (``enable f16;``); arithmetic is f32 throughout (f16 values are widened when
loaded and rounded once when stored).

Two shapes of code for a tiled candidate (:class:`MatmulTile`):

- the *scalar* layout (:func:`scalar_wgsl`, here), for register tiles that are not multiples of
  4: f32 tiles in workgroup memory, one scalar accumulator per output, outputs strided by the
  workgroup size (invocation ``(tx, ty)`` owns rows ``ty + i * BM/TM``, columns
  ``tx + j * BN/TN``). It keeps a WGSL loop over the K step (its accumulators are separate
  locals);
- the *vector* layout (:func:`wgtune.kernels.matmul.vector.vector_wgsl`), for register tiles
  that are multiples of 4: ``vec4<f32>`` tiles and accumulators, every loop unrolled in Python,
  with vec4 or flat global loads, slices of K and kgrid tiles (see there).

The skinny kernels, which stage nothing, are in :mod:`wgtune.kernels.matmul.skinny`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..common import F32_BYTES, SUBGROUPS_DIRECTIVE, ceil_div, wrapped_grid
from .chunks import MAX_FLOAT_K_CHUNKS, MAX_K_CHUNKS, MIN_K_CHUNK, k_chunks, wave_chunks

__all__ = [
    "ADD_TO_C",
    "ADD_TO_C_FLOAT",
    "DTYPES",
    "FLOAT_ATOMICS",
    "HARD_MAX_INVOCATIONS",
    "HARD_MAX_STORAGE",
    "ZERO_WORKGROUP",
    "MatmulTile",
    "adds_into_c",
    "naive_wgsl",
    "scalar_wgsl",
    "zero_wgsl",
]

# What no candidate goes past, whatever the device (most GPUs stop at 1024 invocations, 48-64 KiB).
# Candidates past WebGPU's default limits (wgtune.DeviceLimits()) declare what they need, and the
# core refuses them on a device with lower limits.
HARD_MAX_INVOCATIONS = 1024
HARD_MAX_STORAGE = 49152

# Bytes of one element in the buffers.
DTYPES = {"f32": 4, "f16": 2}

LANES = "xyzw"  # the components of a vec4, by index

# Adds an f32 into C, bound as atomic words: a compare-exchange loop (WGSL has no float atomics).
ADD_TO_C = """
fn add_to_c(index: u32, value: f32) {
  var old = atomicLoad(&c[index]);
  loop {
    let swapped = atomicCompareExchangeWeak(&c[index], old, bitcast<u32>(bitcast<f32>(old) + value));
    if (swapped.exchanged) { break; }
    old = swapped.old_value;
  }
}
"""
# The same with the device's float atomics (``FLOAT_ATOMICS``; natively, not in browsers): one
# hardware add, so adds to one address wait far less, and more chunks pay (chunks.MAX_FLOAT_K_CHUNKS).
ADD_TO_C_FLOAT = """
fn add_to_c(index: u32, value: f32) {
  atomicAdd(&c[index], value);
}
"""
FLOAT_ATOMICS = "shader-float32-atomic"


def adds_into_c(float_atomics: bool) -> tuple[str, str]:
    """C's element type and the ``add_to_c`` function of a candidate that adds into C."""
    return ("atomic<f32>", ADD_TO_C_FLOAT) if float_atomics else ("atomic<u32>", ADD_TO_C)


# Invocations of the stage that zeroes C before a candidate that splits K adds into it.
ZERO_WORKGROUP = 256


def zero_wgsl() -> str:
    """The first stage of a candidate that splits K (kgrid tiles, split skinny kernels): C (f32,
    ``M x N``) set to zero. It declares only
    C and the params, which it uses (the other buffers stay unbound in this stage)."""
    return (
        "@group(0) @binding(2) var<storage, read_write> c: array<f32>;\n"
        "struct Params { m: u32, n: u32, k: u32 }\n"
        "@group(0) @binding(3) var<uniform> p: Params;\n\n"
        f"@compute @workgroup_size({ZERO_WORKGROUP}, 1, 1)\n"
        "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,\n"
        "        @builtin(local_invocation_index) li: u32) {\n"
        f"  let index = (wid.y * groups.x + wid.x) * {ZERO_WORKGROUP}u + li;\n"
        "  if (index < p.m * p.n) { c[index] = 0.0; }\n"
        "}\n"
    )


# -- the tiles -----------------------------------------------------------------------------------


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
    ``tail`` (kgrid tiles): the blocks of C that fill whole waves of ``tail`` workgroups each take
    all of K, and only the blocks of the last, partial wave are cut into K chunks (as ``wave``
    cuts them), so that the launch ends in about a full wave where the blocks alone would leave
    most of its last wave idle; a data-parallel grid with a split-K tail, the simplest form of
    stream-K. Its grid is one run of workgroups (wrapped onto y, the chunks on z).
    ``ahead``: how many K steps ahead the global loads are issued (1, or 2 with ``double``: a
    second set of prefetch registers, for loads whose latency one step's arithmetic does not hide).
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

    def __post_init__(self) -> None:
        if self.copy not in ("", "a", "b", "ab", "bc", "abc") or (self.copy and (
                not self.vec4 or self.subgroup or (self.kgrid and ("c" in self.copy or not self.float_atomics)))):
            raise ValueError(f"{self}: copy is '', 'a', 'b', 'ab', 'bc' or 'abc', for vec4 tiles without subgroup "
                             "(with kgrid: float_atomics, no 'c')")
        if self.float_atomics and not self.kgrid:
            raise ValueError(f"{self}: float_atomics are for the adds of kgrid")
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
        if self.tail < 0 or (self.tail and (not self.kgrid or self.partials or self.stagger or self.wave
                                            or self.copy or self.swizzle)):
            raise ValueError(f"{self}: tail must be >= 0, and needs kgrid without partials, stagger, wave, copy "
                             "or swizzle")
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
        if self.kgrid:
            name += f"_kg{self.kgrid}"
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

    def chunks(self, m: int, n: int, k: int) -> int:
        """K chunks (the grid's z) for an ``m x n x k`` call: 1 unless ``kgrid``."""
        blocks = ceil_div(n, self.bn) * ceil_div(m, self.bm)
        most = MAX_FLOAT_K_CHUNKS if self.float_atomics or self.partials else MAX_K_CHUNKS
        if self.tail:  # only the last wave's blocks are cut, as many chunks as fill it
            left = blocks % self.tail
            return wave_chunks(left, self.tail, min(most, ceil_div(k, MIN_K_CHUNK))) if left else 1
        chunks = k_chunks(self.kgrid, blocks, k, most)
        return wave_chunks(blocks, self.wave, chunks) if self.wave else chunks

    def grid(self, m: int, n: int, k: int) -> tuple[int, int, int]:
        """The grid of an ``m x n x k`` call: ``(ceil(N / bn), ceil(M / bm), K chunks)``; with
        ``tail``, the blocks that take all of K then the last wave's chunks, one run of workgroups
        numbered ``(wid.z * groups.y + wid.y) * groups.x + wid.x`` with the chunks on z."""
        cols, rows, chunks = ceil_div(n, self.bn), ceil_div(m, self.bm), self.chunks(m, n, k)
        if not self.tail:
            return (cols, rows, chunks)
        blocks = cols * rows
        left = blocks % self.tail if chunks > 1 else 0
        across, down, _ = wrapped_grid(ceil_div(blocks - left + left * chunks, chunks))
        return (across, down, chunks)


# -- pieces every kernel shares (the vector layout too) ------------------------------------------


def header(dtype: str, element: str, subgroups: bool = False, b: str | None = None, c: str | None = None,
           with_c: bool = True) -> str:
    """Directives, bindings (``element`` of A, and of B and C unless ``b`` or ``c`` say otherwise;
    no C without ``with_c``) and the params struct."""
    lines = []
    if dtype == "f16":
        lines.append("enable f16;\n")
    if subgroups:
        lines.append(SUBGROUPS_DIRECTIVE)
    lines.append(
        f"@group(0) @binding(0) var<storage, read> a: array<{element}>;\n"
        f"@group(0) @binding(1) var<storage, read> b: array<{b or element}>;\n"
        + (f"@group(0) @binding(2) var<storage, read_write> c: array<{c or element}>;\n" if with_c else "")
        + "struct Params { m: u32, n: u32, k: u32 }\n"
        "@group(0) @binding(3) var<uniform> p: Params;\n"
    )
    return "".join(lines)


def widen(dtype: str, expr: str, vector: bool = False) -> str:
    """``expr`` (a buffer element) as f32 arithmetic."""
    if dtype == "f32":
        return expr
    return f"vec4<f32>({expr})" if vector else f"f32({expr})"


def narrow(dtype: str, expr: str, vector: bool = False) -> str:
    """An f32 value as the buffer's element type."""
    if dtype == "f32":
        return expr
    return f"vec4<{dtype}>({expr})" if vector else f"{dtype}({expr})"


def indent(text: str, prefix: str = "  ") -> str:
    """``text`` with ``prefix`` before each line that is not blank."""
    return "".join(prefix + line if line.strip() else line for line in text.splitlines(keepends=True))


# -- the naive kernel ----------------------------------------------------------------------------


def naive_wgsl(wg_x: int = 16, wg_y: int = 16, dtype: str = "f32") -> str:
    """One output per invocation (column ``x``, row ``y``), reading A and B from global memory."""
    return (
        header(dtype, dtype)
        + f"""
@compute @workgroup_size({wg_x}, {wg_y}, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{
  let col = gid.x;
  let row = gid.y;
  if (row >= p.m || col >= p.n) {{ return; }}
  var acc = 0.0;
  for (var kk = 0u; kk < p.k; kk++) {{
    acc += {widen(dtype, "a[row * p.k + kk]")} * {widen(dtype, "b[kk * p.n + col]")};
  }}
  c[row * p.n + col] = {narrow(dtype, "acc")};
}}
"""
    )


# -- scalar layout -------------------------------------------------------------------------------


def _tile_load(tile: str, count: int, threads: int, body: str) -> str:
    """A loop that spreads ``count`` tile elements over ``threads`` invocations (``e`` is the element)."""
    steps = ceil_div(count, threads)
    guard = "" if count % threads == 0 else f"    if (e >= {count}u) {{ break; }}\n"
    return (
        f"  // stage the {tile} tile: {count} elements, {steps} per invocation\n"
        f"  for (var s = 0u; s < {steps}u; s++) {{\n"
        f"    let e = local_index + s * {threads}u;\n"
        f"{guard}{body}"
        f"  }}\n"
    )


def scalar_wgsl(tile: MatmulTile, dtype: str) -> str:
    """Scalar tiles ``tile_a[kk * bm + r]`` (A transposed) and ``tile_b[kk * bn + c]``."""
    bm, bn, bk, tm, tn = tile.bm, tile.bn, tile.bk, tile.tm, tile.tn
    wx, wy, _ = tile.workgroup_size
    threads = tile.invocations
    lines = [header(dtype, dtype)]
    lines.append(f"var<workgroup> tile_a: array<f32, {bk * bm}>;\n")
    lines.append(f"var<workgroup> tile_b: array<f32, {bk * bn}>;\n\n")
    lines.append(
        f"@compute @workgroup_size({wx}, {wy}, 1)\n"
        "fn main(@builtin(workgroup_id) wid: vec3<u32>,\n"
        "        @builtin(local_invocation_id) lid: vec3<u32>,\n"
        "        @builtin(local_invocation_index) local_index: u32) {\n"
        f"  let row0 = wid.y * {bm}u;\n"
        f"  let col0 = wid.x * {bn}u;\n"
    )
    for i in range(tm):
        for j in range(tn):
            lines.append(f"  var acc_{i}_{j} = 0.0;\n")
    lines.append(f"  for (var k0 = 0u; k0 < p.k; k0 += {bk}u) {{\n")
    load_a = (
        f"    let r = e / {bk}u;\n"
        f"    let kk = e % {bk}u;\n"
        "    let gr = row0 + r;\n"
        "    let gk = k0 + kk;\n"
        "    var v = 0.0;\n"
        f"    if (gr < p.m && gk < p.k) {{ v = {widen(dtype, 'a[gr * p.k + gk]')}; }}\n"
        f"    tile_a[kk * {bm}u + r] = v;\n"
    )
    load_b = (
        f"    let kk = e / {bn}u;\n"
        f"    let cc = e % {bn}u;\n"
        "    let gk = k0 + kk;\n"
        "    let gc = col0 + cc;\n"
        "    var v = 0.0;\n"
        f"    if (gk < p.k && gc < p.n) {{ v = {widen(dtype, 'b[gk * p.n + gc]')}; }}\n"
        "    tile_b[e] = v;\n"
    )
    lines.append(indent(_tile_load("A", bm * bk, threads, load_a)))
    lines.append(indent(_tile_load("B", bk * bn, threads, load_b)))
    lines.append("    workgroupBarrier();\n")
    lines.append(f"    for (var kk = 0u; kk < {bk}u; kk++) {{\n")
    for i in range(tm):
        lines.append(f"      let a_{i} = tile_a[kk * {bm}u + lid.y + {i * wy}u];\n")
    for j in range(tn):
        lines.append(f"      let b_{j} = tile_b[kk * {bn}u + lid.x + {j * wx}u];\n")
    for i in range(tm):
        for j in range(tn):
            lines.append(f"      acc_{i}_{j} += a_{i} * b_{j};\n")
    lines.append("    }\n")
    lines.append("    workgroupBarrier();\n")
    lines.append("  }\n")
    for i in range(tm):
        lines.append(f"  let row_{i} = row0 + lid.y + {i * wy}u;\n")
        lines.append(f"  if (row_{i} < p.m) {{\n")
        for j in range(tn):
            lines.append(f"    let col_{i}_{j} = col0 + lid.x + {j * wx}u;\n")
            store = narrow(dtype, f"acc_{i}_{j}")
            lines.append(f"    if (col_{i}_{j} < p.n) {{ c[row_{i} * p.n + col_{i}_{j}] = {store}; }}\n")
        lines.append("  }\n")
    lines.append("}\n")
    return "".join(lines)
