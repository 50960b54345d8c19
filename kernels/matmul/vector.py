"""The vector layout of the matmul family's tiled candidates (see :mod:`wgtune.kernels.matmul.wgsl`).

For register tiles that are multiples of 4 (``MatmulTile.vector``): the tiles are ``vec4<f32>``
arrays, the A tile stored transposed (``tile_a[k][m / 4]``, optionally padded by one vec4 a row
against bank conflicts of the transposing stores), the outputs of an invocation are ``vec4``
accumulators in 4-wide chunks strided by the workgroup size, so one ``k`` step of the inner loop
reads ``TM/4 + TN/4`` vec4 from workgroup memory for ``TM * TN`` multiply-adds.

Global memory is read one of two ways:

- ``vec4`` (``MatmulTile.vec4``): A, B and C bound as ``array<vec4<...>>``, one load per four
  elements; only for K and N multiples of 4 (every row must start on a vec4);
- *flat*, for any sizes: A, B and C bound as scalar arrays, and each K step's tiles read element
  by element, consecutive invocations at consecutive addresses (along K for A, along N for B), so
  a warp's loads are coalesced. Rows of A past M and columns of B past N are clamped to the last
  one (their sums are never stored), so only the K step that crosses K needs a guard per load:
  every other step takes the unguarded branch (the branch is uniform).

Options: double buffering (two sets of tiles and a register prefetch: the loads of the next K
step are issued before this step's arithmetic and stored after it, one barrier a step),
``strided`` (flat loads: an accumulator's four columns ``bn / tn`` apart, not neighbours, so that
one lane's scalar stores across a warp are consecutive floats of C; the B tile staged in that order),
``swizzle`` (workgroups walk groups of block rows, for caches smaller than the operands),
``kgrid`` (K cut into as many chunks as the grid's z says, whole K steps each, one workgroup
a chunk, each adding its sums into C with an atomic compare-exchange loop on C's bits after the
candidate's first stage (:mod:`wgtune.kernels.matmul.zeroing`) zeroed C: for problems with few outputs and a long
K, where the blocks of C alone cannot fill the GPU), ``tail`` (only the last wave's blocks cut
so, the others storing their sums: :mod:`wgtune.kernels.matmul.placement` places each
workgroup), and ``subgroup``: the A tile is not staged at all; each lane of a
quad loads a quarter of the K step of its rows from global memory and the quad shares them with
``quadBroadcast``. That assumes what every driver seen does (NVIDIA, lavapipe): subgroups are
runs of consecutive ``local_invocation_index``, so a quad is four neighbours along a row of the
workgroup; a driver that differs gives wrong sums, which the output checks catch (a Mismatch,
left out of the tune).

The code is generated straight-line: every loop over the register tile and over the K step is
unrolled here in Python, so that each accumulator is its own local and every workgroup-memory
index is a constant plus a per-invocation value that does not change along K (naga clamps a
dynamic index into a fixed-size array on every access: with the tiles declared as nested arrays
indexed ``[k][x]``, only the loop-invariant ``x`` is clamped). WGSL loops with dynamic indices
into local arrays spill on some compilers.
"""

from __future__ import annotations

from ..common import ceil_div
from .partials import partials_header
from .placement import placement
from .tile import MatmulTile
from .wgsl import LANES, adds_into_c, header, indent, narrow, widen

__all__ = ["vector_wgsl"]

class _VectorKernel:
    """The pieces of one vector-layout kernel; :meth:`wgsl` puts them together.

    Loads are done in *units*: with vec4 loads, four elements along the contiguous axis of the
    source matrix (A units ``(row r, k quad q)``, B units ``(k row kk, column quad q)``); flat, one
    element (A ``(row r, k kk)``, B ``(k row kk, column cc)``). Unit ``u`` of a K step belongs to
    invocation ``u % T``.
    """

    def __init__(self, tile: MatmulTile, dtype: str) -> None:
        if tile.splits_k and dtype != "f32":
            raise ValueError(f"{tile.name}: kgrid and tail add into C with u32 atomics, so they need f32 buffers")
        self.tile = tile
        self.dtype = dtype
        self.wx, self.wy = tile.workgroup_shape
        self.threads = tile.invocations
        self.a_stride = (tile.bm + tile.pad) // 4  # vec4 per row of the transposed A tile
        self.flat = not tile.vec4
        self.kt = tile.k_step  # K staged per step: bk for each slice
        width = 1 if self.flat else 4
        self.a_units = tile.bm * self.kt // width
        self.b_units = self.kt * tile.bn // width
        self.element = dtype if self.flat else f"vec4<{dtype}>"
        self.c_vec4 = not self.flat  # C stored four at a time (a copy of B: N is no multiple of 4)
        # The buffers vec4 loads and stores use and their row strides (a tile with ``copy`` reads the copies).
        self.a_name, self.b_name, self.c_name, self.lda, self.ldb, self.ldc = "a", "b", "c", "p.k", "p.n", "p.n"

    def _steps(self, units: int) -> range:
        return range(ceil_div(units, self.threads))

    def _partial(self, units: int, s: int) -> bool:
        """Whether step ``s`` of spreading ``units`` over the invocations has some left over."""
        return bool(units % self.threads) and (s + 1) * self.threads > units

    # -- global loads into registers ------------------------------------------------------------

    def _load_vec4(self, matrix: str, reg: str, offset: str, inside: str) -> str:
        """``reg = matrix[offset .. offset + 3]`` as one vec4 load where ``inside``, else zero."""
        value = widen(self.dtype, f"{matrix}[({offset}) >> 2u]", vector=True)
        return f"{reg} = vec4<f32>();\nif ({inside}) {{ {reg} = {value}; }}\n"

    def setup(self) -> str:
        """Per-invocation values that stay the same along K."""
        tile, out = self.tile, []
        if tile.subgroup:
            out.append("  let quad_k = (lane & 3u) * 4u;\n")
            for i in range(tile.tm):
                out.append(f"  let ar_{i} = row0 + {self._row(i)};\n")
                out.append(f"  let ao_{i} = ar_{i} * p.k + quad_k;\n")
        elif self.flat:
            # Units past the tile (a last step with some left over) load the tile's last element
            # again and are not stored: clamping keeps every load in bounds without a guard.
            for s in self._steps(self.a_units):
                out.append(f"  let ua_{s} = min(li + {s * self.threads}u, {self.a_units - 1}u);\n")
                out.append(f"  let ar_{s} = ua_{s} / {self.kt}u;\n  let ak_{s} = ua_{s} % {self.kt}u;\n")
                out.append(f"  let ao_{s} = min(row0 + ar_{s}, p.m - 1u) * p.k + ak_{s};\n")
        else:
            for s in self._steps(self.a_units):
                out.append(f"  let ua_{s} = li + {s * self.threads}u;\n")
                out.append(f"  let ar_{s} = ua_{s} / {self.kt // 4}u;\n")
                out.append(f"  let ak_{s} = (ua_{s} % {self.kt // 4}u) * 4u;\n")
                out.append(f"  let ao_{s} = (row0 + ar_{s}) * {self.lda} + ak_{s};\n")
        for s in self._steps(self.b_units):
            if self.flat:
                out.append(f"  let ub_{s} = min(li + {s * self.threads}u, {self.b_units - 1}u);\n")
                out.append(f"  let bk_{s} = ub_{s} / {tile.bn}u;\n  let bc_{s} = ub_{s} % {tile.bn}u;\n")
                out.append(f"  let bo_{s} = bk_{s} * p.n + min(col0 + bc_{s}, p.n - 1u);\n")
                if tile.strided:  # column bc's slot: invocation bc % wx's vec4 bc / (4 wx), lane bc / wx % 4
                    out.append(f"  let bv_{s} = bc_{s} % {self.wx}u + bc_{s} / {4 * self.wx}u * {self.wx}u;\n")
                    out.append(f"  let bl_{s} = bc_{s} / {self.wx}u % 4u;\n")
            else:
                out.append(f"  let ub_{s} = li + {s * self.threads}u;\n")
                out.append(f"  let bk_{s} = ub_{s} / {tile.bn // 4}u;\n")
                out.append(f"  let bq_{s} = ub_{s} % {tile.bn // 4}u;\n")
                out.append(f"  let bo_{s} = bk_{s} * {self.ldb} + col0 + bq_{s} * 4u;\n")
        return "".join(out)

    def _col(self, j: int) -> str:
        """Column (within C) of lane 0 of accumulator ``j`` of invocation ``tx``, as WGSL."""
        if self.tile.strided:
            return f"col0 + tx + {4 * j * self.wx}u"
        return f"col0 + (tx + {j * self.wx}u) * 4u"

    def _lane(self, lane: int) -> str:
        """How far past lane 0's column ``lane``'s is: 1 a lane, or ``bn / tn`` strided."""
        return f"{lane * self.wx if self.tile.strided else lane}u"

    def _row(self, i: int) -> str:
        """Row (within the block) of register row ``i`` of invocation ``(tx, ty)``, as WGSL."""
        chunk, lane = divmod(i, 4)
        return f"(ty + {chunk * self.wy}u) * 4u + {lane}u"

    def declare_registers(self) -> str:
        tile, out = self.tile, []
        kind = "0.0" if self.flat else "vec4<f32>()"
        if tile.subgroup:
            out += [f"  var pa_{i} = vec4<f32>();\n" for i in range(tile.tm)]
            if tile.double:
                out += [f"  var qa_{i} = vec4<f32>();\n" for i in range(tile.tm)]
        else:
            out += [f"  var {a}_{s} = {kind};\n" for a in self._sets("a") for s in self._steps(self.a_units)]
        out += [f"  var {b}_{s} = {kind};\n" for b in self._sets("b") for s in self._steps(self.b_units)]
        return "".join(out)

    def _sets(self, matrix: str) -> tuple[str, ...]:
        """The prefetch registers' names for ``matrix``: ``pa``/``pb``, and ``ra``/``rb`` for the
        step after the next with ``ahead=2``."""
        return (f"p{matrix}", f"r{matrix}") if self.tile.ahead == 2 else (f"p{matrix}",)

    def load(self, k0: str, regs: str = "p") -> str:
        """Global loads of the K step at ``k0`` into the prefetch registers (``regs``: ``p``, or
        ``r`` for the second set of ``ahead=2``)."""
        pa, pb = f"{regs}a", f"{regs}b"
        if self.flat:
            return (f"if ({k0} + {self.kt}u <= p.k) {{\n{indent(self._load_flat(k0, False, regs))}}} else {{\n"
                    f"{indent(self._load_flat(k0, True, regs))}}}\n")
        tile, out = self.tile, []
        if tile.subgroup:
            for i in range(tile.tm):
                out.append(self._load_vec4("a", f"{pa}_{i}", f"ao_{i} + {k0}", f"ar_{i} < p.m && {k0} + quad_k < p.k"))
        else:
            for s in self._steps(self.a_units):
                inside = f"row0 + ar_{s} < p.m && {k0} + ak_{s} < p.k"
                if self._partial(self.a_units, s):
                    inside = f"ua_{s} < {self.a_units}u && " + inside
                out.append(self._load_vec4(self.a_name, f"{pa}_{s}", f"ao_{s} + {k0}", inside))
        for s in self._steps(self.b_units):
            inside = f"{k0} + bk_{s} < p.k && col0 + bq_{s} * 4u < p.n"
            if self._partial(self.b_units, s):
                inside = f"ub_{s} < {self.b_units}u && " + inside
            out.append(self._load_vec4(self.b_name, f"{pb}_{s}", f"bo_{s} + {k0} * {self.ldb}", inside))
        return "".join(out)

    def _load_flat(self, k0: str, edge: bool, regs: str) -> str:
        """Flat loads of the K step at ``k0`` into the ``regs`` registers; ``edge``: the step
        crosses K (zero past it)."""
        out = []
        for matrix, reg, steps, k, offset in (
            ("a", f"{regs}a", self._steps(self.a_units), "ak", f"ao_{{s}} + {k0}"),
            ("b", f"{regs}b", self._steps(self.b_units), "bk", f"bo_{{s}} + {k0} * p.n"),
        ):
            for s in steps:
                value = widen(self.dtype, f"{matrix}[{offset.format(s=s)}]")
                if edge:
                    out.append(f"{reg}_{s} = 0.0;\nif ({k0} + {k}_{s} < p.k) {{ {reg}_{s} = {value}; }}\n")
                else:
                    out.append(f"{reg}_{s} = {value};\n")
        return "".join(out)

    def commit(self, buffer: str, regs: str = "p") -> str:
        """The prefetch registers (``regs``, as :meth:`load`) into the tiles of ``buffer`` (A
        transposed)."""
        tile, out, pa, pb = self.tile, [], f"{regs}a", f"{regs}b"
        sel = f"[{buffer}]" if tile.double else ""
        if tile.subgroup:
            if tile.double:
                out += [f"qa_{i} = {pa}_{i};\n" for i in range(tile.tm)]
        else:
            for s in self._steps(self.a_units):
                if self.flat:
                    body = f"tile_a{sel}[ak_{s}][ar_{s} >> 2u][ar_{s} & 3u] = {pa}_{s};\n"
                else:
                    body = "".join(
                        f"tile_a{sel}[ak_{s} + {c}u][ar_{s} >> 2u][ar_{s} & 3u] = {pa}_{s}.{LANES[c]};\n"
                        for c in range(4)
                    )
                out.append(self._only_within(body, self.a_units, s))
        for s in self._steps(self.b_units):
            if self.tile.strided:
                body = f"tile_b{sel}[bk_{s}][bv_{s}][bl_{s}] = {pb}_{s};\n"
            elif self.flat:
                body = f"tile_b{sel}[bk_{s}][bc_{s} >> 2u][bc_{s} & 3u] = {pb}_{s};\n"
            else:
                body = f"tile_b{sel}[bk_{s}][bq_{s}] = {pb}_{s};\n"
            out.append(self._only_within(body, self.b_units, s))
        return "".join(out)

    def _only_within(self, body: str, units: int, s: int) -> str:
        """``body`` guarded where step ``s`` has units past the tile (unit index unclamped)."""
        if not self._partial(units, s):
            return body
        return f"if (li + {s * self.threads}u < {units}u) {{\n{indent(body)}}}\n"

    def compute(self, buffer: str) -> str:
        """One K step of multiply-adds from the tiles of ``buffer``, unrolled (``rolled``: a loop
        of ``p.steps`` turns, ``rolled`` rows unrolled in each)."""
        tile, out = self.tile, []
        sel = f"[{buffer}]" if tile.double else ""
        a_regs = "qa" if tile.double else "pa"
        first = "kz + " if tile.slices > 1 else ""  # this slice's rows of the staged step
        if tile.rolled:
            first += f"turn * {tile.rolled}u + "
        for kk in range(tile.rolled or tile.bk):
            row = f"{first}{kk}u" if first else str(kk)
            if tile.subgroup:
                source, lane = divmod(kk, 4)
                for i in range(tile.tm):
                    out.append(f"let a{kk}_{i} = quadBroadcast({a_regs}_{i}.{LANES[lane]}, {source}u);\n")
                a_scalar = [f"a{kk}_{i}" for i in range(tile.tm)]
            else:
                for chunk in range(tile.tm // 4):
                    out.append(f"let a{kk}_{chunk} = tile_a{sel}[{row}][ax_{chunk}];\n")
                a_scalar = [f"a{kk}_{i // 4}.{LANES[i % 4]}" for i in range(tile.tm)]
            for j in range(tile.tn // 4):
                out.append(f"let b{kk}_{j} = tile_b{sel}[{row}][bx_{j}];\n")
            for i in range(tile.tm):
                for j in range(tile.tn // 4):
                    out.append(f"acc_{i}_{j} += {a_scalar[i]} * b{kk}_{j};\n")
        if tile.rolled:
            return f"for (var turn = 0u; turn < p.steps; turn++) {{\n{indent(''.join(out))}}}\n"
        return "".join(out)

    def store(self) -> str:
        """The sums into C: vec4 stores, or scalar ones (flat), or with kgrid atomic adds, one
        output after another. (Issuing sixteen outputs' loads, then their compare-exchanges,
        together was 10-25% slower on an H200: the wider window between a load and its
        exchange loses more races.)"""
        if self.tile.stagger:
            return self.staggered_adds()
        tile, out = self.tile, []
        for i in range(tile.tm):
            out.append(f"let row_{i} = row0 + {self._row(i)};\nif (row_{i} < p.m) {{\n")
            for j in range(tile.tn // 4):
                out.append(f"  let col_{i}_{j} = {self._col(j)};\n")
                if self.c_vec4 and not tile.splits_k:
                    value = narrow(self.dtype, f"acc_{i}_{j}", vector=True)
                    at = f"(row_{i} * {self.ldc} + col_{i}_{j}) >> 2u"
                    out.append(f"  if (col_{i}_{j} < p.n) {{ {self.c_name}[{at}] = {value}; }}\n")
                    continue
                if not self.flat and tile.partials:
                    out.append(f"  if (col_{i}_{j} < p.n) {{ store_c4(row_{i} * p.n + col_{i}_{j}, acc_{i}_{j}); }}\n")
                    continue
                for lane in range(4):
                    col = f"col_{i}_{j} + {self._lane(lane)}"
                    index, value = f"row_{i} * p.n + {col}", f"acc_{i}_{j}.{LANES[lane]}"
                    if tile.tail:
                        write = f"put_c({index}, {value}, cut)"
                    elif tile.splits_k:
                        write = f"add_to_c({index}, {value})"
                    else:
                        write = f"c[{index}] = {narrow(self.dtype, value)}"
                    out.append(f"  if ({col} < p.n) {{ {write}; }}\n")
            out.append("}\n")
        return "".join(out)

    def staggered_adds(self) -> str:
        """A kgrid tile's atomic adds cut into ``stagger`` runs, taken in a rotated order: chunk
        ``z`` starts with run ``z % stagger`` (a loop over a switch on a uniform value, so the
        code holds each add once), so that the chunks of a block, which finish together, are
        at different outputs at any moment. (On an H200, 8 runs took 64x64x65536 from 34% to
        42% of torch; issuing a run's loads, then its compare-exchanges, together was slower.)"""
        tile, out, adds = self.tile, [], []
        for i in range(tile.tm):
            out.append(f"let row_{i} = row0 + {self._row(i)};\n")
            for j in range(tile.tn // 4):
                if i == 0:
                    out.append(f"let col_{j} = {self._col(j)};\n")
                adds += [f"if (row_{i} < p.m && col_{j} + {self._lane(lane)} < p.n) "
                         f"{{ add_to_c(row_{i} * p.n + col_{j} + {self._lane(lane)}, acc_{i}_{j}.{LANES[lane]}); }}\n"
                         for lane in range(4)]
        runs = min(tile.stagger, len(adds))
        out.append(f"for (var run = 0u; run < {runs}u; run++) {{\n  switch ((run + wid.z) % {runs}u) {{\n")
        for r in range(runs):
            label = "default" if r == runs - 1 else f"case {r}u"
            part = adds[r * len(adds) // runs : (r + 1) * len(adds) // runs]
            out.append(f"    {label}: {{\n{indent(''.join(part), '      ')}    }}\n")
        out.append("  }\n}\n")
        return "".join(out)

    def wgsl(self) -> str:
        tile = self.tile
        buffers = 2 if tile.double else 1
        c_element, add_to_c = adds_into_c(tile.float_atomics)
        lines = [header(self.dtype, self.element, subgroups=tile.subgroup,
                        c=c_element if tile.splits_k and not tile.partials else None,
                        wave=bool(tile.tail), steps=bool(tile.rolled), partials=tile.partials)]
        if tile.splits_k:
            lines.append(partials_header(vector=not self.flat) if tile.partials else add_to_c)
        if tile.tail:  # a block that takes all of K is C's only writer there: it stores, with no add to wait on
            bits = "value" if tile.float_atomics else "bitcast<u32>(value)"
            lines.append("fn put_c(index: u32, value: f32, add: bool) {\n"
                         f"  if (add) {{ add_to_c(index, value); }} else {{ atomicStore(&c[index], {bits}); }}\n}}\n")
        for name, width, rows, needed in (
            ("tile_a", self.a_stride, self.kt, not tile.subgroup),
            ("tile_b", tile.bn // 4, self.kt, True),
        ):
            if needed:
                array = f"array<array<vec4<f32>, {width}>, {rows}>"
                if tile.double:
                    array = f"array<{array}, {buffers}>"
                lines.append(f"var<workgroup> {name}: {array};\n")
        lane = ",\n        @builtin(subgroup_invocation_id) lane: u32" if tile.subgroup else ""
        size_x, size_y, size_z = tile.workgroup_size
        groups = "        @builtin(num_workgroups) groups: vec3<u32>,\n" if tile.swizzle or tile.splits_k else ""
        lines.append(
            f"\n@compute @workgroup_size({size_x}, {size_y}, {size_z})\n"
            "fn main(@builtin(workgroup_id) wid: vec3<u32>,\n"
            "        @builtin(local_invocation_id) lid: vec3<u32>,\n"
            f"{groups}"
            f"        @builtin(local_invocation_index) li: u32{lane}) {{\n"
        )
        if tile.subgroup:
            lines.append(f"  let tx = li % {self.wx}u;\n  let ty = li / {self.wx}u;\n")
        else:
            lines.append("  let tx = lid.x;\n  let ty = lid.y;\n")
            if tile.slices > 1:
                lines.append(f"  let kz = lid.z * {tile.bk}u;  // this slice's first row of each staged step\n")
        lines.append(placement(tile))
        lines.append(self.setup())
        if not tile.subgroup:
            lines += [f"  let ax_{chunk} = ty + {chunk * self.wy}u;\n" for chunk in range(tile.tm // 4)]
        lines += [f"  let bx_{j} = tx + {j * self.wx}u;\n" for j in range(tile.tn // 4)]
        lines += [
            f"  var acc_{i}_{j} = vec4<f32>();\n" for i in range(tile.tm) for j in range(tile.tn // 4)
        ]
        lines.append(self.declare_registers())
        step = f"{self.kt}u"
        if tile.ahead == 2:
            lines.append(self.two_ahead(step))
        elif tile.double:
            lines.append("  // prologue: the first K step into buffer 0\n")
            lines.append(indent(self.load("k_begin")))
            lines.append(indent(self.commit("0u")))
            lines.append("  workgroupBarrier();\n  var cur = 0u;\n")
            lines.append(f"  for (var k0 = k_begin; k0 < k_end; k0 += {step}) {{\n")
            lines.append("    // the next K step's loads are in flight during this step's arithmetic\n")
            lines.append(indent(self.load(f"(k0 + {step})"), "    "))
            lines.append(indent(self.compute("cur"), "    "))
            lines.append(indent(self.commit("1u - cur"), "    "))
            lines.append("    workgroupBarrier();\n    cur = 1u - cur;\n  }\n")
        else:
            lines.append(f"  for (var k0 = k_begin; k0 < k_end; k0 += {step}) {{\n")
            lines.append(indent(self.load("k0"), "    "))
            lines.append(indent(self.commit(""), "    "))
            lines.append("    workgroupBarrier();\n")
            lines.append(indent(self.compute(""), "    "))
            lines.append("    workgroupBarrier();\n  }\n")
        if tile.slices > 1:
            lines.append(indent(self.combine_slices()))
            lines.append("  if (lid.z == 0u) {\n" + indent(self.store(), "    ") + "  }\n")
        else:
            lines.append(indent(self.store()))
        lines.append("}\n")
        return "".join(lines)

    def two_ahead(self, step: str) -> str:
        """The K loop with loads two steps ahead (``ahead=2``): while step ``k`` is computed from
        one buffer, step ``k + 1`` waits in registers to be staged into the other and step
        ``k + 2`` is being loaded into the other registers; the loop is unrolled twice so that
        the two register sets keep their names."""
        def half(load_into: str, commit_from: str, ahead: str) -> str:  # a block: its lets are its own
            return ("    {\n" + indent(self.load(f"(k0 + {ahead})", load_into), "      ")
                    + indent(self.compute("cur"), "      ")
                    + indent(self.commit("1u - cur", commit_from), "      ")
                    + "      workgroupBarrier();\n      cur = 1u - cur;\n    }\n")

        return (
            "  // prologue: the first K step into buffer 0, the second into registers\n"
            + indent(self.load("k_begin"))
            + indent(self.commit("0u"))
            + "  workgroupBarrier();\n  var cur = 0u;\n"
            + indent(self.load(f"(k_begin + {step})", "r"))
            + f"  for (var k0 = k_begin; k0 < k_end; k0 += 2u * {step}) {{\n"
            + half("p", "r", f"2u * {step}")
            + f"    if (k0 + {step} >= k_end) {{ break; }}  // uniform across the workgroup\n"
            + half("r", "p", f"3u * {step}")
            + "  }\n"
        )

    def combine_slices(self) -> str:
        """Slices 1.. hand their sums to slice 0 through the B tile, ``rows`` register rows of
        each at a time; slice 0 adds them in slice order."""
        tile, wy = self.tile, self.wy
        sel = "[0]" if tile.double else ""
        rows = min(tile.tm, self.kt // ((tile.slices - 1) * wy))  # register rows a round (>= 1: MatmulTile checks)
        out = []
        def slot(s: str, i: int) -> str:  # where register row i of slice s meets slice 0 this round
            return f"tile_b{sel}[(({s} - 1u) * {rows}u + {i % rows}u) * {wy}u + ty]"

        for first in range(0, tile.tm, rows):
            chunk = range(first, min(tile.tm, first + rows))

            out.append("workgroupBarrier();  // the tiles are free\nif (lid.z > 0u) {\n")
            out += [f"  {slot('lid.z', i)}[bx_{j}] = acc_{i}_{j};\n" for i in chunk for j in range(tile.tn // 4)]
            out.append("}\nworkgroupBarrier();\nif (lid.z == 0u) {\n")
            for z in range(1, tile.slices):
                out += [f"  acc_{i}_{j} += {slot(f'{z}u', i)}[bx_{j}];\n" for i in chunk for j in range(tile.tn // 4)]
            out.append("}\n")
        return "".join(out)


def vector_wgsl(tile: MatmulTile, dtype: str) -> str:
    """WGSL for ``tile`` (a register tile of multiples of 4) with ``dtype`` buffers."""
    return _VectorKernel(tile, dtype).wgsl()
