"""The vector layout of the matmul family's tiled candidates (see :mod:`wgtune.kernels.matmul_wgsl`).

For register tiles that are multiples of 4 (``MatmulTile.vector``): the tiles are ``vec4<f32>``
arrays, the A tile stored transposed (``tile_a[k][m / 4]``, optionally padded by one vec4 a row
against bank conflicts of the transposing stores), the outputs of an invocation are ``vec4``
accumulators in 4-wide chunks strided by the workgroup size, so one ``k`` step of the inner loop
reads ``TM/4 + TN/4`` vec4 from workgroup memory for ``TM * TN`` multiply-adds. Options: ``vec4``
global loads and stores (the buffers bound as ``array<vec4<...>>``, so only for K and N
multiples of 4), double buffering (two sets of tiles and a register prefetch: the loads of the
next K step are issued before this step's arithmetic and stored after it, one barrier a step),
``swizzle`` (workgroups walk groups of block rows, for caches smaller than the operands), and
``subgroup``: the A tile is not staged at all; each lane of a quad loads a quarter of the K step
of its rows from global memory and the quad shares them with ``quadBroadcast``. That assumes
what every driver seen does (NVIDIA, lavapipe): subgroups are runs of consecutive
``local_invocation_index``, so a quad is four neighbours along a row of the workgroup; a driver
that differs gives wrong sums, which the output checks catch (a Mismatch, left out of the tune).

The code is generated straight-line: every loop over the register tile and over the K step is
unrolled here in Python, so that each accumulator is its own local and every workgroup-memory
index is a constant plus a per-invocation value that does not change along K (naga clamps a
dynamic index into a fixed-size array on every access: with the tiles declared as nested arrays
indexed ``[k][x]``, only the loop-invariant ``x`` is clamped). WGSL loops with dynamic indices
into local arrays spill on some compilers.
"""

from __future__ import annotations

from .common import ceil_div
from .matmul_wgsl import LANES, MatmulTile, header, indent, narrow, widen

__all__ = ["vector_wgsl"]


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
            value = widen(self.dtype, f"{matrix}[({offset}) >> 2u]", vector=True)
            out.append(f"if ({inside}) {{ {reg} = {value}; }}\n")
            return "".join(out)
        out.append(f"if ({inside}) {{\n")
        for c in range(4):
            value = widen(self.dtype, f"{matrix}[{offset} + {c}u]")
            out.append(f"  if ({lane_guard.format(c=c)}) {{ {reg}.{LANES[c]} = {value}; }}\n")
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
            for s in range(ceil_div(self.a_units, self.threads)):
                out.append(f"  let ua_{s} = li + {s * self.threads}u;\n")
                out.append(f"  let ar_{s} = ua_{s} / {tile.bk // 4}u;\n")
                out.append(f"  let ak_{s} = (ua_{s} % {tile.bk // 4}u) * 4u;\n")
                out.append(f"  let ao_{s} = (row0 + ar_{s}) * p.k + ak_{s};\n")
        for s in range(ceil_div(self.b_units, self.threads)):
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
            out += [f"  var pa_{s} = vec4<f32>();\n" for s in range(ceil_div(self.a_units, self.threads))]
        out += [f"  var pb_{s} = vec4<f32>();\n" for s in range(ceil_div(self.b_units, self.threads))]
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
            for s in range(ceil_div(self.a_units, self.threads)):
                inside = f"row0 + ar_{s} < p.m && {k0} + ak_{s} < p.k"
                if self.a_units % self.threads and (s + 1) * self.threads > self.a_units:
                    inside = f"ua_{s} < {self.a_units}u && " + inside
                guard = f"{k0} + ak_{s} + {{c}}u < p.k"
                out.append(self._load_quad("a", f"pa_{s}", f"ao_{s} + {k0}", inside, guard))
        for s in range(ceil_div(self.b_units, self.threads)):
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
            for s in range(ceil_div(self.a_units, self.threads)):
                body = "".join(
                    f"tile_a{sel}[ak_{s} + {c}u][ar_{s} >> 2u][ar_{s} & 3u] = pa_{s}.{LANES[c]};\n" for c in range(4)
                )
                if self.a_units % self.threads and (s + 1) * self.threads > self.a_units:
                    body = f"if (ua_{s} < {self.a_units}u) {{\n{indent(body)}}}\n"
                out.append(body)
        for s in range(ceil_div(self.b_units, self.threads)):
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
                    f"quadBroadcast({a_regs}_{i}.{LANES[lane]}, {source}u)" for i in range(tile.tm)
                ]
                for i, value in enumerate(a_values):
                    out.append(f"let a{kk}_{i} = {value};\n")
                a_scalar = [f"a{kk}_{i}" for i in range(tile.tm)]
            else:
                for chunk in range(tile.tm // 4):
                    out.append(f"let a{kk}_{chunk} = tile_a{sel}[{kk}][ax_{chunk}];\n")
                a_scalar = [f"a{kk}_{i // 4}.{LANES[i % 4]}" for i in range(tile.tm)]
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
                    value = narrow(self.dtype, f"acc_{i}_{j}", vector=True)
                    out.append(f"  let col_{i}_{j} = {col};\n")
                    out.append(f"  if (col_{i}_{j} < p.n) {{ c[(row_{i} * p.n + col_{i}_{j}) >> 2u] = {value}; }}\n")
                    continue
                out.append(f"  let col_{i}_{j} = {col};\n")
                for lane in range(4):
                    value = narrow(self.dtype, f"acc_{i}_{j}.{LANES[lane]}")
                    out.append(
                        f"  if (col_{i}_{j} + {lane}u < p.n) "
                        f"{{ c[row_{i} * p.n + col_{i}_{j} + {lane}u] = {value}; }}\n"
                    )
            out.append("}\n")
        return "".join(out)

    def wgsl(self) -> str:
        tile = self.tile
        buffers = 2 if tile.double else 1
        lines = [header(self.dtype, self.element, subgroups=tile.subgroup)]
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
            lines.append(indent(self.load("0u")))
            lines.append(indent(self.commit("0u")))
            lines.append("  workgroupBarrier();\n  var cur = 0u;\n")
            lines.append(f"  for (var k0 = 0u; k0 < p.k; k0 += {step}) {{\n")
            lines.append("    // the next K step's loads are in flight during this step's arithmetic\n")
            lines.append(indent(self.load(f"(k0 + {step})"), "    "))
            lines.append(indent(self.compute("cur"), "    "))
            lines.append(indent(self.commit("1u - cur"), "    "))
            lines.append("    workgroupBarrier();\n    cur = 1u - cur;\n  }\n")
        else:
            lines.append(f"  for (var k0 = 0u; k0 < p.k; k0 += {step}) {{\n")
            lines.append(indent(self.load("k0"), "    "))
            lines.append(indent(self.commit(""), "    "))
            lines.append("    workgroupBarrier();\n")
            lines.append(indent(self.compute(""), "    "))
            lines.append("    workgroupBarrier();\n  }\n")
        lines.append(indent(self.store()))
        lines.append("}\n")
        return "".join(lines)


def vector_wgsl(tile: MatmulTile, dtype: str) -> str:
    """WGSL for ``tile`` (a register tile of multiples of 4) with ``dtype`` buffers."""
    return _VectorKernel(tile, dtype).wgsl()
