"""Matmul kernels for skinny problems: a few rows (``M`` small, a GEMV ``1 x N`` at the extreme)
or a few columns (``N`` small), any K. The sets are in :mod:`wgtune.kernels.matmul`.

``C[M, N] = A[M, K] @ B[K, N]``, row-major, buffers ``(A, B, C)`` at bindings 0, 1, 2, params
``(M, N, K)`` at binding 3, like every candidate of the family.

Such problems have too few outputs for tiles of C to fill a GPU, and little reuse: each element
of the big operand is used by a handful of outputs. So these kernels stage nothing: a workgroup
owns a small block of C, its invocations split K among them (invocation ``s`` of ``S`` takes
``k = s, s + S, ...``, several loads in flight a step), each keeps the whole block's partial sums
in registers, and the slices' sums meet in workgroup memory at the end, added in slice order (so
a candidate's sums are the same on every run).

- ``rows`` (:class:`SkinnyTile` with ``layout="rows"``), for a few rows: a workgroup owns ``rows``
  rows and ``4 * cells`` columns; invocation ``(cell, slice)``, ``cell`` fastest, reads four
  columns of row ``k`` of B (one vec4 load with ``vec4``, which needs N a multiple of 4, else four
  scalar loads ``cells`` apart, coalesced) and the ``rows`` values ``A[r, k]``.
- ``cols`` (``layout="cols"``), for a few columns: a workgroup owns ``cols`` columns and
  ``rows * cells`` rows, ``rows`` per invocation; invocation ``(slice, cell)``, ``slice`` fastest,
  so a warp reads consecutive ``k`` of a row of A (coalesced) and the rows ``k`` of B it needs;
  with ``a_vec4`` (K a multiple of 4) a step is a vec4 of each row of A, four ``k``, against
  rows ``4q .. 4q + 3`` of B (on an H200 a GEMV of one column reached 97% of torch so, 78% with
  scalar loads of A).

Rows of A past M and columns of B past N are clamped to the last (their sums are never stored),
so the loops need no guards; K ends each invocation's loop. Outputs past M or N are skipped.

``stage_a`` (``rows``, rows a multiple of 4): the workgroup first copies its rows of A over a
chunk of K into workgroup memory (k-major, so that one step's rows are whole vec4), and each step
reads them from there: two vec4 reads for eight rows instead of eight loads from A, which every
invocation of a slice made alike (the loads, not the multiply-adds, bound these kernels).
``stage_b`` (``cols``, columns a multiple of 4) is its mirror: the workgroup's columns of B a
chunk of K at a time, a step's columns read as vec4, so that 16 columns (a narrow N whole, A read
once) cost four reads a step beside the rows' loads of A.

``split`` (f32 only): K is also cut into chunks over workgroups (the grid's z, about ``split``
workgroups in all, as a kgrid tile's), each adding its block's sums into C with atomics after
the candidate's first stage zeroed C: for a GEMV or a few rows of a wide B, where the blocks of
C alone are too few to keep every core reading B, and for a long K.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..common import F32_BYTES, ceil_div
from .chunks import MAX_FLOAT_K_CHUNKS, MAX_K_CHUNKS, k_chunks
from .wgsl import DTYPES, LANES, adds_into_c, header, indent, narrow, widen

__all__ = ["REDUCE_STORAGE", "SkinnyTile", "skinny_wgsl"]

# Bytes of workgroup memory the slices' sums meet in, at most (WebGPU's default limit is 16 KiB):
# a block with more partial sums than that is combined in rounds.
REDUCE_STORAGE = 16384


@dataclass(frozen=True)
class SkinnyTile:
    """The shape of a skinny candidate (see the module doc).

    ``layout`` ``"rows"``: ``rows`` rows of C by ``4 * cells`` columns per workgroup. ``"cols"``:
    ``cols`` columns by ``rows * cells`` rows, ``rows`` per invocation. ``threads`` invocations
    (``threads / cells`` slices of K), ``unroll`` K steps of loads issued together, ``vec4``: B
    (``rows``: and only B) read as vec4, for N a multiple of 4; ``a_vec4`` (``cols``): A read as
    vec4 along K, four k a step, for K a multiple of 4. ``stage_a`` (``rows``): A's rows staged
    in workgroup memory a chunk of K at a time, read as vec4; ``stage_b`` (``cols``): B's columns
    so. ``split``: K chunks over about that many workgroups, added into C with atomics (f32 only;
    0: no split).
    """

    layout: str
    rows: int
    cells: int
    cols: int = 4
    threads: int = 256
    unroll: int = 4
    vec4: bool = False
    a_vec4: bool = False
    split: int = 0
    float_atomics: bool = False
    stage_a: bool = False
    stage_b: bool = False

    def __post_init__(self) -> None:
        if self.float_atomics and not self.split:
            raise ValueError(f"{self}: float_atomics are for the adds of split")
        if self.layout not in ("rows", "cols"):
            raise ValueError(f"{self}: layout must be 'rows' or 'cols'")
        if min(self.rows, self.cells, self.cols, self.threads, self.unroll) < 1:
            raise ValueError(f"{self}: every size must be >= 1")
        if self.threads % self.cells or self.threads > 1024:
            raise ValueError(f"{self}: threads must be a multiple of cells, at most 1024")
        if self.layout == "rows" and self.cols != 4:
            raise ValueError(f"{self}: a 'rows' invocation owns 4 columns")
        if self.vec4 and self.cols % 4:
            raise ValueError(f"{self}: vec4 loads of B need a multiple of 4 columns")
        if self.a_vec4 and self.layout != "cols":
            raise ValueError(f"{self}: vec4 loads of A are for the 'cols' layout")
        if self.stage_a and (self.layout != "rows" or self.rows % 4 or self.rows > 4 * self.round_outputs):
            raise ValueError(f"{self}: stage_a is for 'rows' tiles of a multiple of 4 rows, as many as the "
                             "reduction's workgroup memory holds")
        if self.stage_b and (self.layout != "cols" or self.cols % 4 or self.vec4 or self.a_vec4):
            raise ValueError(f"{self}: stage_b is for 'cols' tiles of a multiple of 4 columns, without vec4 loads")
        if self.split < 0:
            raise ValueError(f"{self}: split must be >= 0")
        if self.outputs_per_thread > 64:
            raise ValueError(f"{self}: {self.outputs_per_thread} sums per invocation, more than 64 registers hold")

    @property
    def slices(self) -> int:
        return self.threads // self.cells

    @property
    def block(self) -> tuple[int, int]:
        """Rows and columns of C a workgroup owns."""
        if self.layout == "rows":
            return (self.rows, 4 * self.cells)
        return (self.rows * self.cells, self.cols)

    @property
    def outputs_per_thread(self) -> int:
        return self.rows * self.cols

    @property
    def round_outputs(self) -> int:
        """Sums per invocation combined in one round of the final reduction."""
        width = 4 if self.layout == "rows" else 1  # a "rows" sum is a vec4 (four columns)
        fits = REDUCE_STORAGE // (F32_BYTES * width * self.threads)
        # A round's sums are added by (sums x cells) invocations: at most the workgroup.
        return max(1, min(self.outputs_per_thread // width, fits, self.slices))

    @property
    def workgroup_storage(self) -> int:
        width = 4 if self.layout == "rows" else 1
        staged_b = F32_BYTES * self.threads * self.cols if self.stage_b else 0  # a chunk of ``threads`` steps
        return F32_BYTES * width * self.threads * self.round_outputs + staged_b

    @property
    def name(self) -> str:
        staged = ("_sa" if self.stage_a else "") + ("_sb" if self.stage_b else "")
        loads = ("a4" if self.a_vec4 else "") + ("v4" if self.vec4 else "f") + staged
        split = (f"_kg{self.split}" if self.split else "") + ("_fa" if self.float_atomics else "")
        if self.layout == "rows":
            return f"rows{self.rows}_c{4 * self.cells}_wg{self.threads}_u{self.unroll}_{loads}{split}"
        return f"cols{self.cols}_r{self.rows}x{self.cells}_wg{self.threads}_u{self.unroll}_{loads}{split}"

    def grid(self, m: int, n: int, k: int) -> tuple[int, int, int]:
        """Blocks of C along N and M, and K chunks (1 without ``split``)."""
        block_m, block_n = self.block
        blocks_n, blocks_m = ceil_div(n, block_n), ceil_div(m, block_m)
        most = MAX_FLOAT_K_CHUNKS if self.float_atomics else MAX_K_CHUNKS
        return (blocks_n, blocks_m, k_chunks(self.split, blocks_n * blocks_m, k, most))


def skinny_wgsl(tile: SkinnyTile, dtype: str = "f32") -> str:
    """WGSL for ``tile`` with ``dtype`` buffers (f32 arithmetic). With ``split`` this is the
    stage that adds into C (the candidate zeroes C first)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: one of {', '.join(DTYPES)}")
    if tile.split and dtype != "f32":
        raise ValueError(f"{tile.name}: split adds into C with u32 atomics, so it needs f32 buffers")
    return (_rows_wgsl if tile.layout == "rows" else _cols_wgsl)(tile, dtype)


def _signature(tile: SkinnyTile, element: str, dtype: str, b_element: str) -> str:
    width = "vec4<f32>" if tile.layout == "rows" else "f32"
    groups = " @builtin(num_workgroups) groups: vec3<u32>," if tile.split else ""
    c_element, add_to_c = adds_into_c(tile.float_atomics)
    return (
        header(dtype, element, b=b_element, c=c_element if tile.split else dtype)
        + (add_to_c if tile.split else "")
        + f"var<workgroup> part: array<{width}, {tile.threads * tile.round_outputs}>;\n"
        + (f"var<workgroup> sb: array<vec4<f32>, {tile.threads * tile.cols // 4}>;\n" if tile.stage_b else "")
        + "\n"
        f"@compute @workgroup_size({tile.threads}, 1, 1)\n"
        f"fn main(@builtin(workgroup_id) wid: vec3<u32>,{groups} @builtin(local_invocation_index) li: u32) {{\n"
    )


def _write(tile: SkinnyTile, index: str, value: str) -> str:
    """One output into C: stored, or added with ``split`` (C holds the other chunks' sums)."""
    return f"add_to_c({index}, {value});" if tile.split else f"c[{index}] = {value};"


Step = Callable[[str, int], tuple[str, str]]


def _split_bounds(count: str) -> str:
    """``k_begin`` and ``k_end``, the steps of ``count`` that are chunk ``wid.z`` of ``groups.z``
    (``split``); a workgroup past the last step adds nothing and returns (uniform: no barrier yet)."""
    return (f"  let k_chunk = ({count} + groups.z - 1u) / groups.z;\n"
            f"  let k_begin = wid.z * k_chunk;\n  let k_end = min({count}, k_begin + k_chunk);\n"
            "  if (k_begin >= k_end) { return; }\n")


def _k_loop(tile: SkinnyTile, step: Step, count: str = "p.k", chunked: bool = False) -> str:
    """The K loop of one invocation over ``count`` steps (with ``split``, this workgroup's chunk
    of them): ``unroll`` steps at a time, every load of them issued before their arithmetic
    (loads in flight together), then the rest one by one. ``step(k, u)`` gives the loads and the
    multiply-adds of one step at ``k``, its values named by ``u``. ``chunked``: the caller's
    loop over chunks of K has split K among the workgroups already."""
    s, u = tile.slices, tile.unroll
    steps = [step(f"k{i}", i) for i in range(u)]
    body = "".join(f"  let k{i} = k + {i * s}u;\n" for i in range(u))
    body += "".join(loads for loads, _ in steps) + "".join(sums for _, sums in steps)
    last = "".join(step("k", 0))
    if tile.split and not chunked:
        head = _split_bounds(count) + "  var k = k_begin + slice;\n"
        count = "k_end"
    else:
        head = "  var k = slice;\n"
    return (
        head
        + f"  for (; k + {(u - 1) * s}u < {count}; k += {u * s}u) {{\n{indent(body)}  }}\n"
        f"  for (; k < {count}; k += {s}u) {{\n{indent(last)}  }}\n"
    )


def _staged_k_loop(tile: SkinnyTile, step: Step, width: int, load: Callable[[str], str], into: str) -> str:
    """The K loop of a tile that stages an operand (``stage_a``, ``stage_b``): chunks of
    ``threads`` steps, each first copied into the workgroup array ``into`` (``width`` values a
    step, step ``k``'s at ``k * width``, so element ``e`` of the chunk is value ``e % width`` of
    step ``e / width``, ``load(e)`` from global memory: consecutive invocations fill consecutive
    words), then :func:`_k_loop`'s steps over the chunk. Its bounds are the workgroup's alike,
    so the barriers are in uniform control flow; the last one frees ``into`` for the reduction."""
    threads = tile.threads
    head = _split_bounds("p.k") if tile.split else "  let k_begin = 0u;\n  let k_end = p.k;\n"
    copy = [f"workgroupBarrier();  // the last chunk's steps have read {into}\n"]
    for i in range(width):  # width * threads elements: ``width`` an invocation
        e = f"li + {i * threads}u" if i else "li"
        copy.append(
            f"let e{i} = {e};\nvar v{i} = 0.0;\n"
            f"if (kc + e{i} / {width}u < k_end) {{\n  v{i} = {load(f'e{i}')};\n}}\n"
            f"{into}[e{i} / 4u][e{i} % 4u] = v{i};\n"
        )
    copy.append("workgroupBarrier();\nlet kn = min(k_end - kc, " + f"{threads}u);\n")
    body = indent("".join(copy), "    ") + indent(_k_loop(tile, step, "kn", chunked=True))
    return head + f"  for (var kc = k_begin; kc < k_end; kc += {threads}u) {{\n{body}  }}\n  workgroupBarrier();\n"


def _rows_wgsl(tile: SkinnyTile, dtype: str) -> str:
    cells, rows = tile.cells, tile.rows
    b_element = f"vec4<{dtype}>" if tile.vec4 else dtype
    lines = [_signature(tile, dtype, dtype, b_element)]
    lines.append(
        f"  let row0 = wid.y * {rows}u;\n  let col0 = wid.x * {4 * cells}u;\n"
        f"  let cell = li % {cells}u;\n  let slice = li / {cells}u;\n"
    )
    if not tile.stage_a:
        lines += [f"  let ar{r} = min(row0 + {r}u, p.m - 1u) * p.k;\n" for r in range(rows)]
    if tile.vec4:  # N is a multiple of 4 here: a cell's four columns are one vec4 of each row of B
        lines.append("  let nq = p.n / 4u;\n  let bq = min(col0 / 4u + cell, nq - 1u);\n")
    else:
        lines += [f"  let bc{j} = min(col0 + cell + {j * cells}u, p.n - 1u);\n" for j in range(4)]
    lines += [f"  var acc{r} = vec4<f32>();\n" for r in range(rows)]

    def step(k: str, u: int) -> tuple[str, str]:
        row = f"(kc + {k})" if tile.stage_a else k  # staged: k counts from the chunk's start
        if tile.vec4:
            b = widen(dtype, f"b[{row} * nq + bq]", vector=True)
        else:
            b = "vec4<f32>(" + ", ".join(widen(dtype, f"b[{row} * p.n + bc{j}]") for j in range(4)) + ")"
        loads = [f"  let b{u} = {b};\n"]
        if tile.stage_a:  # rows 4q .. 4q + 3 of step k are vec4 q of the step's rows / 4
            loads += [f"  let a{u}_{q} = part[{k} * {rows // 4}u + {q}u];\n" for q in range(rows // 4)]
            a = [f"a{u}_{r // 4}.{LANES[r % 4]}" for r in range(rows)]
        else:
            loads += [f"  let a{u}_{r} = {widen(dtype, f'a[ar{r} + {k}]')};\n" for r in range(rows)]
            a = [f"a{u}_{r}" for r in range(rows)]
        return "".join(loads), "".join(f"  acc{r} += {a[r]} * b{u};\n" for r in range(rows))

    def a_value(e: str) -> str:  # value e % rows of step e / rows of the chunk at kc
        return widen(dtype, f"a[min(row0 + {e} % {rows}u, p.m - 1u) * p.k + kc + {e} / {rows}u]")

    lines.append(_staged_k_loop(tile, step, rows, a_value, "part") if tile.stage_a else _k_loop(tile, step))

    def store(row: str, total: str) -> str:
        out = []
        for j in range(4):
            col = f"col0 + cl * 4u + {j}u" if tile.vec4 else f"col0 + cl + {j * cells}u"
            value = narrow(dtype, f"{total}[{j}]")
            out.append(f"if ({col} < p.n) {{ {_write(tile, f'({row}) * p.n + {col}', value)} }}\n")
        return f"if ({row} < p.m) {{\n{indent(''.join(out))}}}\n"

    lines.append(_reduce(tile, [f"acc{r}" for r in range(rows)], "vec4<f32>()", store))
    lines.append("}\n")
    return "".join(lines)


def _cols_wgsl(tile: SkinnyTile, dtype: str) -> str:
    """With ``a_vec4`` a step is four k: a vec4 of each row of A, rows ``4q .. 4q + 3`` of B."""
    cells, rows, cols = tile.cells, tile.rows, tile.cols
    s = tile.slices
    b_element = f"vec4<{dtype}>" if tile.vec4 else dtype
    a_element = f"vec4<{dtype}>" if tile.a_vec4 else dtype
    lines = [_signature(tile, a_element, dtype, b_element)]
    lines.append(
        f"  let row0 = wid.y * {rows * cells}u;\n  let col0 = wid.x * {cols}u;\n"
        f"  let slice = li % {s}u;\n  let cell = li / {s}u;\n"
    )
    row_length = "(p.k / 4u)" if tile.a_vec4 else "p.k"  # elements of A's type in a row
    lines += [f"  let ar{r} = min(row0 + cell * {rows}u + {r}u, p.m - 1u) * {row_length};\n" for r in range(rows)]
    if tile.vec4:
        lines.append("  let nq = p.n / 4u;\n")
        lines += [f"  let bq{q} = min(col0 / 4u + {q}u, nq - 1u);\n" for q in range(cols // 4)]
    elif not tile.stage_b:
        lines += [f"  let bc{j} = min(col0 + {j}u, p.n - 1u);\n" for j in range(cols)]
    lines += [f"  var acc{r}_{j} = 0.0;\n" for r in range(rows) for j in range(cols)]

    def b_row(k: str, name: str) -> tuple[list[str], list[str]]:
        """Loads of row ``k`` of B at this workgroup's columns, and the value of each column."""
        if tile.vec4:
            loads = [f"  let {name}_{q} = {widen(dtype, f'b[({k}) * nq + bq{q}]', vector=True)};\n"
                     for q in range(cols // 4)]
            return loads, [f"{name}_{j // 4}[{j % 4}]" for j in range(cols)]
        loads = [f"  let {name}_{j} = {widen(dtype, f'b[({k}) * p.n + bc{j}]')};\n" for j in range(cols)]
        return loads, [f"{name}_{j}" for j in range(cols)]

    def step(k: str, u: int) -> tuple[str, str]:
        at = f"kc + {k}" if tile.stage_b else k  # staged: k counts from the chunk's start
        out = [f"  let a{u}_{r} = {widen(dtype, f'a[ar{r} + {at}]', vector=tile.a_vec4)};\n" for r in range(rows)]
        if tile.stage_b:  # columns 4q .. 4q + 3 of step k are vec4 q of the step's cols / 4
            out += [f"  let b{u}_{q} = sb[{k} * {cols // 4}u + {q}u];\n" for q in range(cols // 4)]
            sums = [f"  acc{r}_{j} += a{u}_{r} * b{u}_{j // 4}.{LANES[j % 4]};\n"
                    for r in range(rows) for j in range(cols)]
            return "".join(out), "".join(sums)
        if not tile.a_vec4:
            loads, b = b_row(k, f"b{u}")
            sums = [f"  acc{r}_{j} += a{u}_{r} * {b[j]};\n" for r in range(rows) for j in range(cols)]
            return "".join(out + loads), "".join(sums)
        columns = []
        for lane in range(4):  # rows 4k .. 4k + 3 of B against the vec4 of each row of A
            loads, b = b_row(f"{k} * 4u + {lane}u", f"b{u}_{lane}")
            out += loads
            columns.append(b)
        sums = [f"  acc{r}_{j} += dot(a{u}_{r}, vec4<f32>({', '.join(b[j] for b in columns)}));\n"
                for r in range(rows) for j in range(cols)]
        return "".join(out), "".join(sums)

    def b_value(e: str) -> str:  # column e % cols of step e / cols of the chunk at kc
        return widen(dtype, f"b[(kc + {e} / {cols}u) * p.n + min(col0 + {e} % {cols}u, p.n - 1u)]")

    if tile.stage_b:
        lines.append(_staged_k_loop(tile, step, cols, b_value, "sb"))
    else:
        lines.append(_k_loop(tile, step, "(p.k / 4u)" if tile.a_vec4 else "p.k"))

    def store(row: str, total: str, j: int) -> str:
        col = f"col0 + {j}u"
        return f"if ({row} < p.m && {col} < p.n) {{ {_write(tile, f'({row}) * p.n + {col}', narrow(dtype, total))} }}\n"

    lines.append(_reduce(tile, [f"acc{r}_{j}" for r in range(rows) for j in range(cols)], "0.0", store))
    lines.append("}\n")
    return "".join(lines)


def _reduce(tile: SkinnyTile, sums: list[str], zero: str, store: Callable[..., str]) -> str:
    """The slices' partial ``sums`` (one list entry per sum an invocation keeps) added up in
    workgroup memory, ``round_outputs`` sums a round, and stored by ``store``."""
    per_round, threads, slices, cells = tile.round_outputs, tile.threads, tile.slices, tile.cells
    out = []
    for first in range(0, len(sums), per_round):
        chunk = sums[first : first + per_round]
        if first:
            out.append("workgroupBarrier();  // the last round's sums are read\n")
        out += [f"part[{q * threads}u + li] = {name};\n" for q, name in enumerate(chunk)]
        out.append("workgroupBarrier();\n")
        # Invocation t < len(chunk) * cells adds sum q = t / cells of cell t % cells over the
        # slices s: invocation (cell, slice) is li = cell + cells * slice for "rows" (cell
        # fastest), li = slice + slices * cell for "cols".
        where = f"s * {cells}u + cl" if tile.layout == "rows" else f"cl * {slices}u + s"
        slot = f"q * {threads}u + {where}"
        body = [
            f"let q = li / {cells}u;\nlet cl = li % {cells}u;\nvar total = {zero};\n",
            f"for (var s = 0u; s < {slices}u; s++) {{ total += part[{slot}]; }}\n",
        ]
        for q in range(len(chunk)):
            index = first + q
            if tile.layout == "rows":
                code = store(f"row0 + {index}u", "total")
            else:
                r, j = divmod(index, tile.cols)
                code = store(f"row0 + cl * {tile.rows}u + {r}u", "total", j)
            body.append(f"if (q == {q}u) {{\n{indent(code)}}}\n")
        out.append(f"if (li < {len(chunk) * cells}u) {{\n{indent(''.join(body))}}}\n")
    return indent("".join(out))
