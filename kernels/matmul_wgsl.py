"""WGSL generators of the matmul family (see :mod:`wgtune.kernels.matmul` for the sets).

``C[M, N] = A[M, K] @ B[K, N]``, all row-major; buffers ``(A, B, C)`` at bindings 0, 1, 2, params
``(M, N, K)`` as a uniform at binding 3. Every generated kernel handles any sizes: loads outside
the matrices read zero, stores outside ``C`` are skipped. The element type of the buffers is
``f32`` or ``f16`` (``enable f16;``); arithmetic is f32 throughout (f16 values are widened when
loaded and rounded once when stored).

The vector layout is generated straight-line: every loop over the register tile and over the
K step is unrolled here in Python, so that each accumulator is its own local and every
workgroup-memory index is a constant plus a per-invocation value that does not change along K
(naga clamps a dynamic index into a fixed-size array on every access: with the tiles declared
as nested arrays indexed ``[k][x]``, only the loop-invariant ``x`` is clamped). WGSL loops with
dynamic indices into local arrays spill on some compilers. The scalar layout, for the smallest
register tiles, keeps a WGSL loop over the K step (its accumulators are separate locals too).

Two shapes of code:

- the *scalar* layout (:func:`_scalar_wgsl`), for register tiles that are not multiples of 4:
  f32 tiles in workgroup memory, one scalar accumulator per output, outputs strided by the
  workgroup size (invocation ``(tx, ty)`` owns rows ``ty + i * BM/TM``, columns
  ``tx + j * BN/TN``);
- the *vector* layout (:func:`_vector_wgsl`), for register tiles that are multiples of 4: the
  tiles are ``vec4<f32>`` arrays, the A tile stored transposed (``tile_a[k][m / 4]``, optionally
  padded by one vec4 a row against bank conflicts of the transposing stores), the outputs of an
  invocation are ``vec4`` accumulators in 4-wide chunks strided by the workgroup size, so one
  ``k`` step of the inner loop reads ``TM/4 + TN/4`` vec4 from workgroup memory for
  ``TM * TN`` multiply-adds. Options: ``vec4`` global loads and stores (the buffers bound as
  ``array<vec4<...>>``, so only for K and N multiples of 4), double buffering (two sets of tiles
  and a register prefetch: the loads of the next K step are issued before this step's
  arithmetic and stored after it, one barrier a step), ``swizzle`` (workgroups walk groups of
  block rows, for caches smaller than the operands), and ``subgroup``: the A tile is not staged
  at all; each lane of a quad loads a quarter of the K step of its rows from global memory and
  the quad shares them with ``quadBroadcast``. That assumes what every driver seen does (NVIDIA,
  lavapipe): subgroups are runs of consecutive ``local_invocation_index``, so a quad is four
  neighbours along a row of the workgroup; a driver that differs gives wrong sums, which the
  output checks catch (a Mismatch, left out of the tune).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DTYPES", "MAX_INVOCATIONS", "MAX_WORKGROUP_STORAGE", "MatmulTile", "naive_wgsl", "tiled_wgsl"]

# WebGPU's default limits. Candidates over them are tagged with what they need (the core
# refuses them on a device with lower limits).
MAX_WORKGROUP_STORAGE = 16384
MAX_INVOCATIONS = 256
# What no candidate goes past, whatever the device (most GPUs stop at 1024 invocations, 48-64 KiB).
HARD_MAX_INVOCATIONS = 1024
HARD_MAX_STORAGE = 49152
F32_BYTES = 4

# Bytes of one element in the buffers.
DTYPES = {"f32": 4, "f16": 2}

# Tint (Chrome's WGSL compiler) requires the directive before subgroup builtins; naga as shipped
# with wgpu-py 0.32 rejects it ("not yet supported") but accepts the builtins. In Pyodide the
# kernels go to the browser's WebGPU.
SUBGROUPS_DIRECTIVE = "enable subgroups;\n"  # the native backend drops it for naga, which rejects it

_LANES = "xyzw"


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def _header(dtype: str, element: str, subgroups: bool = False) -> str:
    """Directives, bindings (``element`` of A, B, C) and the params struct."""
    lines = []
    if dtype == "f16":
        lines.append("enable f16;\n")
    if subgroups:
        lines.append(SUBGROUPS_DIRECTIVE)
    lines.append(
        f"@group(0) @binding(0) var<storage, read> a: array<{element}>;\n"
        f"@group(0) @binding(1) var<storage, read> b: array<{element}>;\n"
        f"@group(0) @binding(2) var<storage, read_write> c: array<{element}>;\n"
        "struct Params { m: u32, n: u32, k: u32 }\n"
        "@group(0) @binding(3) var<uniform> p: Params;\n"
    )
    return "".join(lines)


def _widen(dtype: str, expr: str, vector: bool = False) -> str:
    """``expr`` (a buffer element) as f32 arithmetic."""
    if dtype == "f32":
        return expr
    return f"vec4<f32>({expr})" if vector else f"f32({expr})"


def _narrow(dtype: str, expr: str, vector: bool = False) -> str:
    """An f32 value as the buffer's element type."""
    if dtype == "f32":
        return expr
    return f"vec4<{dtype}>({expr})" if vector else f"{dtype}({expr})"


# -- the naive kernel ----------------------------------------------------------------------------


def naive_wgsl(wg_x: int = 16, wg_y: int = 16, dtype: str = "f32") -> str:
    """One output per invocation (column ``x``, row ``y``), reading A and B from global memory."""
    return (
        _header(dtype, dtype)
        + f"""
@compute @workgroup_size({wg_x}, {wg_y}, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{
  let col = gid.x;
  let row = gid.y;
  if (row >= p.m || col >= p.n) {{ return; }}
  var acc = 0.0;
  for (var kk = 0u; kk < p.k; kk++) {{
    acc += {_widen(dtype, "a[row * p.k + kk]")} * {_widen(dtype, "b[kk * p.n + col]")};
  }}
  c[row * p.n + col] = {_narrow(dtype, "acc")};
}}
"""
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
    of 4, so that the four lanes of a quad own the same rows).
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

    def __post_init__(self) -> None:
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
        if self.subgroup and (self.bk != 16 or self.workgroup_shape[0] % 4 or self.pad):
            raise ValueError(f"{self}: subgroup needs bk == 16, bn / tn a multiple of 4 and no A tile to pad")
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
        return (wx * wy, 1, 1) if self.subgroup else (wx, wy, 1)

    @property
    def invocations(self) -> int:
        return (self.bn // self.tn) * (self.bm // self.tm)

    @property
    def workgroup_storage(self) -> int:
        """Bytes of the staged tiles: A is ``bk x (bm + pad)`` (none with subgroup), B ``bk x bn``;
        twice that when double buffered. Always f32, whatever the buffers' type."""
        a_tile = 0 if self.subgroup else self.bk * (self.bm + self.pad)
        return F32_BYTES * (2 if self.double else 1) * (a_tile + self.bk * self.bn)

    @property
    def fits_webgpu_defaults(self) -> bool:
        return self.invocations <= MAX_INVOCATIONS and self.workgroup_storage <= MAX_WORKGROUP_STORAGE

    @property
    def name(self) -> str:
        name = f"tile{self.bm}x{self.bn}_k{self.bk}_reg{self.tm}x{self.tn}"
        for flag, suffix in ((self.vec4, "_v4"), (self.pad, "_pad"), (self.double, "_db"), (self.subgroup, "_sg")):
            if flag:
                name += suffix
        if self.swizzle:
            name += f"_sw{self.swizzle}"
        return name


def tiled_wgsl(tile: MatmulTile, dtype: str = "f32") -> str:
    """WGSL for one tiled candidate with ``dtype`` buffers."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: one of {', '.join(DTYPES)}")
    return _vector_wgsl(tile, dtype) if tile.vector else _scalar_wgsl(tile, dtype)


def _indent(text: str, prefix: str = "  ") -> str:
    return "".join(prefix + line if line.strip() else line for line in text.splitlines(keepends=True))


# -- scalar layout -------------------------------------------------------------------------------


def _tile_load(tile: str, count: int, threads: int, body: str) -> str:
    """A loop that spreads ``count`` tile elements over ``threads`` invocations (``e`` is the element)."""
    steps = _ceil_div(count, threads)
    guard = "" if count % threads == 0 else f"    if (e >= {count}u) {{ break; }}\n"
    return (
        f"  // stage the {tile} tile: {count} elements, {steps} per invocation\n"
        f"  for (var s = 0u; s < {steps}u; s++) {{\n"
        f"    let e = local_index + s * {threads}u;\n"
        f"{guard}{body}"
        f"  }}\n"
    )


def _scalar_wgsl(tile: MatmulTile, dtype: str) -> str:
    """Scalar tiles ``tile_a[kk * bm + r]`` (A transposed) and ``tile_b[kk * bn + c]``."""
    bm, bn, bk, tm, tn = tile.bm, tile.bn, tile.bk, tile.tm, tile.tn
    wx, wy, _ = tile.workgroup_size
    threads = tile.invocations
    lines = [_header(dtype, dtype)]
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
        f"    if (gr < p.m && gk < p.k) {{ v = {_widen(dtype, 'a[gr * p.k + gk]')}; }}\n"
        f"    tile_a[kk * {bm}u + r] = v;\n"
    )
    load_b = (
        f"    let kk = e / {bn}u;\n"
        f"    let cc = e % {bn}u;\n"
        "    let gk = k0 + kk;\n"
        "    let gc = col0 + cc;\n"
        "    var v = 0.0;\n"
        f"    if (gk < p.k && gc < p.n) {{ v = {_widen(dtype, 'b[gk * p.n + gc]')}; }}\n"
        "    tile_b[e] = v;\n"
    )
    lines.append(_indent(_tile_load("A", bm * bk, threads, load_a)))
    lines.append(_indent(_tile_load("B", bk * bn, threads, load_b)))
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
            store = _narrow(dtype, f"acc_{i}_{j}")
            lines.append(f"    if (col_{i}_{j} < p.n) {{ c[row_{i} * p.n + col_{i}_{j}] = {store}; }}\n")
        lines.append("  }\n")
    lines.append("}\n")
    return "".join(lines)


# -- vector layout -------------------------------------------------------------------------------


class _VectorKernel:
    """The pieces of one vector-layout kernel; :meth:`wgsl` puts them together.

    Loads are done in *units* of four elements along the contiguous axis of the source matrix
    (a vec4 load, or four guarded scalar loads): A units are ``(row r, k quad q)``, B units
    ``(k row kk, column quad q)``. Unit ``u`` of a K step belongs to invocation ``u % T``.
    """

    def __init__(self, tile: MatmulTile, dtype: str) -> None:
        self.tile = tile
        self.dtype = dtype
        self.wx, self.wy = tile.workgroup_shape
        self.threads = tile.invocations
        self.a_stride = (tile.bm + tile.pad) // 4  # vec4 per row of the transposed A tile
        self.a_units = tile.bm * tile.bk // 4
        self.b_units = tile.bk * tile.bn // 4
        self.vector_load = tile.vec4
        self.element = f"vec4<{dtype}>" if tile.vec4 else dtype

    # -- global loads into registers ------------------------------------------------------------

    def _load_quad(self, matrix: str, reg: str, offset: str, inside: str, lane_guard: str) -> str:
        """``reg = matrix[offset .. offset + 3]``, zero outside: a vec4 load where ``inside``, or
        four scalar loads, each also guarded by ``lane_guard`` (``{c}`` is the lane)."""
        out = [f"{reg} = vec4<f32>();\n"]
        if self.vector_load:
            value = _widen(self.dtype, f"{matrix}[({offset}) >> 2u]", vector=True)
            out.append(f"if ({inside}) {{ {reg} = {value}; }}\n")
            return "".join(out)
        out.append(f"if ({inside}) {{\n")
        for c in range(4):
            value = _widen(self.dtype, f"{matrix}[{offset} + {c}u]")
            out.append(f"  if ({lane_guard.format(c=c)}) {{ {reg}.{_LANES[c]} = {value}; }}\n")
        out.append("}\n")
        return "".join(out)

    def setup(self) -> str:
        """Per-invocation values that stay the same along K."""
        tile, out = self.tile, []
        if tile.swizzle:
            # Workgroups in launch order walk down groups of `swizzle` block rows, column by
            # column, so that neighbours in time share rows of A and columns of B in the cache.
            out.append(
                "  let wg_linear = wid.y * groups.x + wid.x;\n"
                f"  let wg_span = {tile.swizzle}u * groups.x;\n"
                f"  let wg_first = (wg_linear / wg_span) * {tile.swizzle}u;\n"
                f"  let wg_rows = min(groups.y - wg_first, {tile.swizzle}u);\n"
                "  let wg_within = wg_linear % wg_span;\n"
                f"  let row0 = (wg_first + wg_within % wg_rows) * {tile.bm}u;\n"
                f"  let col0 = (wg_within / wg_rows) * {tile.bn}u;\n"
            )
        else:
            out.append(f"  let row0 = wid.y * {tile.bm}u;\n  let col0 = wid.x * {tile.bn}u;\n")
        if tile.subgroup:
            out.append("  let quad_k = (lane & 3u) * 4u;\n")
            for i in range(tile.tm):
                out.append(f"  let ar_{i} = row0 + {self._row(i)};\n")
                out.append(f"  let ao_{i} = ar_{i} * p.k + quad_k;\n")
        else:
            for s in range(_ceil_div(self.a_units, self.threads)):
                out.append(f"  let ua_{s} = li + {s * self.threads}u;\n")
                out.append(f"  let ar_{s} = ua_{s} / {tile.bk // 4}u;\n")
                out.append(f"  let ak_{s} = (ua_{s} % {tile.bk // 4}u) * 4u;\n")
                out.append(f"  let ao_{s} = (row0 + ar_{s}) * p.k + ak_{s};\n")
        for s in range(_ceil_div(self.b_units, self.threads)):
            out.append(f"  let ub_{s} = li + {s * self.threads}u;\n")
            out.append(f"  let bk_{s} = ub_{s} / {tile.bn // 4}u;\n")
            out.append(f"  let bq_{s} = ub_{s} % {tile.bn // 4}u;\n")
            out.append(f"  let bo_{s} = bk_{s} * p.n + col0 + bq_{s} * 4u;\n")
        return "".join(out)

    def _row(self, i: int) -> str:
        """Row (within the block) of register row ``i`` of invocation ``(tx, ty)``, as WGSL."""
        chunk, lane = divmod(i, 4)
        return f"(ty + {chunk * self.wy}u) * 4u + {lane}u"

    def declare_registers(self) -> str:
        tile, out = self.tile, []
        if tile.subgroup:
            out += [f"  var pa_{i} = vec4<f32>();\n" for i in range(tile.tm)]
            if tile.double:
                out += [f"  var qa_{i} = vec4<f32>();\n" for i in range(tile.tm)]
        else:
            out += [f"  var pa_{s} = vec4<f32>();\n" for s in range(_ceil_div(self.a_units, self.threads))]
        out += [f"  var pb_{s} = vec4<f32>();\n" for s in range(_ceil_div(self.b_units, self.threads))]
        return "".join(out)

    def load(self, k0: str) -> str:
        """Global loads of the K step at ``k0`` into the prefetch registers."""
        tile, out = self.tile, []
        if tile.subgroup:
            for i in range(tile.tm):
                inside = f"ar_{i} < p.m && {k0} + quad_k < p.k"
                guard = f"{k0} + quad_k + {{c}}u < p.k"
                out.append(self._load_quad("a", f"pa_{i}", f"ao_{i} + {k0}", inside, guard))
        else:
            for s in range(_ceil_div(self.a_units, self.threads)):
                inside = f"row0 + ar_{s} < p.m && {k0} + ak_{s} < p.k"
                if self.a_units % self.threads and (s + 1) * self.threads > self.a_units:
                    inside = f"ua_{s} < {self.a_units}u && " + inside
                guard = f"{k0} + ak_{s} + {{c}}u < p.k"
                out.append(self._load_quad("a", f"pa_{s}", f"ao_{s} + {k0}", inside, guard))
        for s in range(_ceil_div(self.b_units, self.threads)):
            inside = f"{k0} + bk_{s} < p.k && col0 + bq_{s} * 4u < p.n"
            if self.b_units % self.threads and (s + 1) * self.threads > self.b_units:
                inside = f"ub_{s} < {self.b_units}u && " + inside
            guard = f"col0 + bq_{s} * 4u + {{c}}u < p.n"
            out.append(self._load_quad("b", f"pb_{s}", f"bo_{s} + {k0} * p.n", inside, guard))
        return "".join(out)

    def commit(self, buffer: str) -> str:
        """The prefetch registers into the tiles of ``buffer`` (A transposed)."""
        tile, out = self.tile, []
        sel = f"[{buffer}]" if tile.double else ""
        if tile.subgroup:
            if tile.double:
                out += [f"qa_{i} = pa_{i};\n" for i in range(tile.tm)]
        else:
            for s in range(_ceil_div(self.a_units, self.threads)):
                body = "".join(
                    f"tile_a{sel}[ak_{s} + {c}u][ar_{s} >> 2u][ar_{s} & 3u] = pa_{s}.{_LANES[c]};\n" for c in range(4)
                )
                if self.a_units % self.threads and (s + 1) * self.threads > self.a_units:
                    body = f"if (ua_{s} < {self.a_units}u) {{\n{_indent(body)}}}\n"
                out.append(body)
        for s in range(_ceil_div(self.b_units, self.threads)):
            body = f"tile_b{sel}[bk_{s}][bq_{s}] = pb_{s};\n"
            if self.b_units % self.threads and (s + 1) * self.threads > self.b_units:
                body = f"if (ub_{s} < {self.b_units}u) {{ {body.strip()} }}\n"
            out.append(body)
        return "".join(out)

    def compute(self, buffer: str) -> str:
        """One K step of multiply-adds from the tiles of ``buffer``, unrolled."""
        tile, out = self.tile, []
        sel = f"[{buffer}]" if tile.double else ""
        a_regs = "qa" if tile.double else "pa"
        for kk in range(tile.bk):
            if tile.subgroup:
                source, lane = divmod(kk, 4)
                a_values = [
                    f"quadBroadcast({a_regs}_{i}.{_LANES[lane]}, {source}u)" for i in range(tile.tm)
                ]
                for i, value in enumerate(a_values):
                    out.append(f"let a{kk}_{i} = {value};\n")
                a_scalar = [f"a{kk}_{i}" for i in range(tile.tm)]
            else:
                for chunk in range(tile.tm // 4):
                    out.append(f"let a{kk}_{chunk} = tile_a{sel}[{kk}][ax_{chunk}];\n")
                a_scalar = [f"a{kk}_{i // 4}.{_LANES[i % 4]}" for i in range(tile.tm)]
            for j in range(tile.tn // 4):
                out.append(f"let b{kk}_{j} = tile_b{sel}[{kk}][bx_{j}];\n")
            for i in range(tile.tm):
                for j in range(tile.tn // 4):
                    out.append(f"acc_{i}_{j} += {a_scalar[i]} * b{kk}_{j};\n")
        return "".join(out)

    def store(self) -> str:
        tile, out = self.tile, []
        for i in range(tile.tm):
            out.append(f"let row_{i} = row0 + {self._row(i)};\n")
            out.append(f"if (row_{i} < p.m) {{\n")
            for j in range(tile.tn // 4):
                col = f"col0 + (tx + {j * self.wx}u) * 4u"
                if self.vector_load:
                    value = _narrow(self.dtype, f"acc_{i}_{j}", vector=True)
                    out.append(f"  let col_{i}_{j} = {col};\n")
                    out.append(f"  if (col_{i}_{j} < p.n) {{ c[(row_{i} * p.n + col_{i}_{j}) >> 2u] = {value}; }}\n")
                    continue
                out.append(f"  let col_{i}_{j} = {col};\n")
                for lane in range(4):
                    value = _narrow(self.dtype, f"acc_{i}_{j}.{_LANES[lane]}")
                    out.append(
                        f"  if (col_{i}_{j} + {lane}u < p.n) "
                        f"{{ c[row_{i} * p.n + col_{i}_{j} + {lane}u] = {value}; }}\n"
                    )
            out.append("}\n")
        return "".join(out)

    def wgsl(self) -> str:
        tile = self.tile
        buffers = 2 if tile.double else 1
        lines = [_header(self.dtype, self.element, subgroups=tile.subgroup)]
        for name, width, rows, needed in (
            ("tile_a", self.a_stride, tile.bk, not tile.subgroup),
            ("tile_b", tile.bn // 4, tile.bk, True),
        ):
            if needed:
                array = f"array<array<vec4<f32>, {width}>, {rows}>"
                if tile.double:
                    array = f"array<{array}, {buffers}>"
                lines.append(f"var<workgroup> {name}: {array};\n")
        lane = ",\n        @builtin(subgroup_invocation_id) lane: u32" if tile.subgroup else ""
        size_x, size_y, _ = tile.workgroup_size
        groups = "        @builtin(num_workgroups) groups: vec3<u32>,\n" if tile.swizzle else ""
        lines.append(
            f"\n@compute @workgroup_size({size_x}, {size_y}, 1)\n"
            "fn main(@builtin(workgroup_id) wid: vec3<u32>,\n"
            "        @builtin(local_invocation_id) lid: vec3<u32>,\n"
            f"{groups}"
            f"        @builtin(local_invocation_index) li: u32{lane}) {{\n"
        )
        if tile.subgroup:
            lines.append(f"  let tx = li % {self.wx}u;\n  let ty = li / {self.wx}u;\n")
        else:
            lines.append("  let tx = lid.x;\n  let ty = lid.y;\n")
        lines.append(self.setup())
        if not tile.subgroup:
            lines += [f"  let ax_{chunk} = ty + {chunk * self.wy}u;\n" for chunk in range(tile.tm // 4)]
        lines += [f"  let bx_{j} = tx + {j * self.wx}u;\n" for j in range(tile.tn // 4)]
        lines += [
            f"  var acc_{i}_{j} = vec4<f32>();\n" for i in range(tile.tm) for j in range(tile.tn // 4)
        ]
        lines.append(self.declare_registers())
        step = f"{tile.bk}u"
        if tile.double:
            lines.append("  // prologue: the first K step into buffer 0\n")
            lines.append(_indent(self.load("0u")))
            lines.append(_indent(self.commit("0u")))
            lines.append("  workgroupBarrier();\n  var cur = 0u;\n")
            lines.append(f"  for (var k0 = 0u; k0 < p.k; k0 += {step}) {{\n")
            lines.append("    // the next K step's loads are in flight during this step's arithmetic\n")
            lines.append(_indent(self.load(f"(k0 + {step})"), "    "))
            lines.append(_indent(self.compute("cur"), "    "))
            lines.append(_indent(self.commit("1u - cur"), "    "))
            lines.append("    workgroupBarrier();\n    cur = 1u - cur;\n  }\n")
        else:
            lines.append(f"  for (var k0 = 0u; k0 < p.k; k0 += {step}) {{\n")
            lines.append(_indent(self.load("k0"), "    "))
            lines.append(_indent(self.commit(""), "    "))
            lines.append("    workgroupBarrier();\n")
            lines.append(_indent(self.compute(""), "    "))
            lines.append("    workgroupBarrier();\n  }\n")
        lines.append(_indent(self.store()))
        lines.append("}\n")
        return "".join(lines)


def _vector_wgsl(tile: MatmulTile, dtype: str) -> str:
    return _VectorKernel(tile, dtype).wgsl()
