"""Matmul candidates on subgroup matrices: the tensor cores from WGSL (issue 31).

Dawn's ``chromium-experimental-subgroup-matrix`` (WGSL ``enable chromium_experimental_subgroup_matrix;``)
lets a subgroup multiply 16x16 matrices of f16 into an f32 result; on an NVIDIA H200 they run on the
tensor cores. wgpu-native has no such feature today, and browsers keep it behind a flag, so these
candidates run on a :class:`~wgtune.backends.dawn.DawnDevice` whose adapter has it; every other
device refuses them uncompiled (their ``features``), at no cost.

A candidate (:class:`SubgroupMatrixTile`) is three stages, each on the call's A, B, C and params:

1. ``<name>``: copies A (``M x K``) into ``a_h`` (``Mp x Kp`` f16) and B (``K x N``) into ``b_h``
   (``Kp x Np`` f16), zero past the matrices: ``Mp``, ``Np`` are M, N rounded up to the tile's
   block and ``Kp`` K rounded up to the tile's K step (16 unstaged), so the fragments' loads
   never leave the copies and need no guard. f32 inputs are rounded to f16 here (the precision
   the product then has is said below); f16 inputs are copied as they are.
2. ``<name>_mma``: a workgroup of ``wm x wn`` subgroups owns a block of ``wm * fm * 16`` rows by
   ``wn * fn * 16`` columns; each subgroup ``fm x fn`` result fragments, summing along K in f32,
   stored into ``c_f`` (``Mp x Np`` f32). A staged tile (``bk``: :func:`staged_mma_wgsl`) copies
   A's and B's blocks into workgroup memory a K step at a time, 16 bytes a load, and its
   subgroups load their fragments from there: on an H200 8 subgroups of 2x4 fragments with a K
   step of 64 ran at 208-213 TFLOP/s, 2.9x the best unstaged tile, which loads its fragments
   straight from the copies (``bench/results/h200-subgroup-matrix-staged.txt``); the unstaged
   ones, of 64x64 blocks and smaller, keep more SMs busy on small shapes.
3. ``<name>_out``: C from ``c_f``, less the padding, as f32 or rounded to f16.

What a result is: for f16 inputs, the exact products summed in f32 (the H200 measured 6e-7 of
``sum |a b|`` against float64, the f32 tiles' own rounding); for f32 inputs, the products of the
inputs rounded to f16 (a 10-bit mantissa as TF32's, but f16's range: magnitudes past 65504 become
infinite, under 6e-5 lose bits), summed in f32: torch's f16 matmul with f32 accumulation, not
full f32. That is why f32 inputs have their own set (``matmul_set(precision="f16-products")``).

The kernels are written for 32-wide subgroups (NVIDIA's, Apple's): Dawn wants a subgroup-matrix
kernel's workgroup to be a multiple of the device's widest subgroup, and refuses the pipeline
elsewhere (the candidate is a Launch result, the others go on). Loads and stores name their
layout as Dawn's current WGSL does (``subgroupMatrixLoad<T, row_major>``); the older form with a
column-major flag still compiles, with a deprecation warning.
"""

from __future__ import annotations

from dataclasses import dataclass

from wgtune import Args, Kernel

from ..common import ceil_div, wrapped_grid
from .padded import COPY_WORKGROUP

__all__ = ["FRAGMENT", "SUBGROUP_MATRIX", "SubgroupMatrixTile", "subgroup_matrix_kernel", "subgroup_matrix_wgsl"]

SUBGROUP_MATRIX = "chromium-experimental-subgroup-matrix"
FRAGMENT = 16  # the 16x16x16 f16 -> f32 configuration (the H200's, Apple's)
A_H, B_H, C_F = "a_h", "b_h", "c_f"  # the scratch buffers' WGSL names
FEATURES = ("shader-f16", "subgroups", SUBGROUP_MATRIX)
STAGE_PAD = 8  # f16 a staged row is padded by (16 bytes): a fragment's 8 rows start on 8 bank groups
LAUNCH_GROUP = 8  # staged tiles take their blocks 8 block rows at a time: neighbours share B's in L2


@dataclass(frozen=True)
class SubgroupMatrixTile:
    """``wm x wn`` subgroups a workgroup, each ``fm x fn`` result fragments of 16x16; ``subgroup``
    invocations a subgroup (32 on the devices these are for; tests compile other widths)."""

    wm: int = 1
    wn: int = 1
    fm: int = 4
    fn: int = 4
    subgroup: int = 32
    bk: int = 0
    """0: fragments straight from the copies; else the K step of A's and B's blocks staged in
    workgroup memory (a multiple of 16; :func:`staged_mma_wgsl`)."""
    buffers: int = 1
    """Staged tiles: 1 (two barriers a step) or 2 (the next step's blocks stored into the other
    buffer while this one's are multiplied, one barrier)."""

    def __post_init__(self) -> None:
        if min(self.wm, self.wn, self.fm, self.fn, self.subgroup) < 1:
            raise ValueError(f"{self}: every size must be >= 1")
        if self.bk % FRAGMENT or self.bk < 0 or self.buffers not in (1, 2):
            raise ValueError(f"{self}: bk a multiple of {FRAGMENT} (0: unstaged), buffers 1 or 2")

    @property
    def k_step(self) -> int:
        """What K is padded to a multiple of."""
        return self.bk or FRAGMENT

    @property
    def workgroup_storage(self) -> int:
        """Bytes of workgroup memory: the staged blocks of A (``bm x (bk + 8)`` f16) and B
        (``bk x (bn + 8)``), ``buffers`` of each; 0 unstaged."""
        if not self.bk:
            return 0
        bm, bn = self.block
        return 2 * self.buffers * (bm * (self.bk + STAGE_PAD) + self.bk * (bn + STAGE_PAD))

    @property
    def block(self) -> tuple[int, int]:
        """Rows and columns of C a workgroup owns."""
        return self.wm * self.fm * FRAGMENT, self.wn * self.fn * FRAGMENT

    @property
    def threads(self) -> int:
        return self.wm * self.wn * self.subgroup

    @property
    def name(self) -> str:
        width = "" if self.subgroup == 32 else f"_sg{self.subgroup}"
        staged = f"_k{self.bk}" + ("_db" if self.buffers == 2 else "") if self.bk else ""
        return f"sgm{self.wm}x{self.wn}_f{self.fm}x{self.fn}{staged}{width}"

    def padded(self, m: int, n: int, k: int) -> tuple[int, int, int]:
        """``(Mp, Np, Kp)``: the copies' sizes (see the module doc)."""
        bm, bn = self.block
        return ceil_div(m, bm) * bm, ceil_div(n, bn) * bn, ceil_div(k, self.k_step) * self.k_step


_PARAMS = "struct Params { m: u32, n: u32, k: u32 }\n@group(0) @binding(3) var<uniform> p: Params;\n"


def _padded_sizes(tile: SubgroupMatrixTile) -> str:
    bm, bn = tile.block
    return (f"  let mp = (p.m + {bm - 1}u) / {bm}u * {bm}u;\n"
            f"  let np = (p.n + {bn - 1}u) / {bn}u * {bn}u;\n"
            f"  let kp = (p.k + {tile.k_step - 1}u) / {tile.k_step}u * {tile.k_step}u;\n")


def _copy_quads(source: str, target: str, rows: str, padded_rows: str, cols: str, width: str, last: bool) -> str:
    """Quad ``q`` of ``target`` (``padded_rows x width`` f16, four an invocation) from ``source``
    (``rows x cols``, zero past them); unless ``last``, an invocation past it goes on to the next."""
    lanes = "\n".join(f"      if (col + {i}u < {cols}) {{ v[{i}] = f16({source}[at + {i}u]); }}" for i in range(4))
    quads = f"{padded_rows} * ({width} / 4u)"
    return (f"  if (q < {quads}) {{\n"
            f"    let row = q / ({width} / 4u);\n"
            f"    let col = (q - row * ({width} / 4u)) * 4u;\n"
            "    var v = vec4<f16>();\n"
            f"    if (row < {rows}) {{\n"
            f"      let at = row * {cols} + col;\n{lanes}\n"
            "    }\n"
            f"    {target}[q] = v;\n"
            "    return;\n"
            "  }\n"
            + ("" if last else f"  q -= {quads};\n"))


def copy_in_wgsl(tile: SubgroupMatrixTile, dtype: str) -> str:
    """Stage 1: A and B into their f16 copies (``dtype``: the inputs' type, f32 or f16)."""
    return (
        "enable f16;\n"
        f"@group(0) @binding(0) var<storage, read> a: array<{dtype}>;\n"
        f"@group(0) @binding(1) var<storage, read> b: array<{dtype}>;\n"
        + _PARAMS
        + f"@group(0) @binding(4) var<storage, read_write> {A_H}: array<vec4<f16>>;\n"
        f"@group(0) @binding(5) var<storage, read_write> {B_H}: array<vec4<f16>>;\n\n"
        f"@compute @workgroup_size({COPY_WORKGROUP}, 1, 1)\n"
        "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,\n"
        "        @builtin(local_invocation_index) li: u32) {\n"
        + _padded_sizes(tile)
        + f"  var q = (wid.y * groups.x + wid.x) * {COPY_WORKGROUP}u + li;\n"
        + _copy_quads("a", A_H, "p.m", "mp", "p.k", "kp", last=False)
        + _copy_quads("b", B_H, "p.k", "kp", "p.n", "np", last=True)
        + "}\n"
    )


def mma_wgsl(tile: SubgroupMatrixTile) -> str:
    """Stage 2: the padded product ``c_f = a_h @ b_h`` on subgroup matrices."""
    if tile.bk:
        return staged_mma_wgsl(tile)
    bm, bn = tile.block
    frags = [(i, j) for i in range(tile.fm) for j in range(tile.fn)]
    left = "subgroup_matrix_left<f16, 16, 16>"
    right = "subgroup_matrix_right<f16, 16, 16>"
    loads = "\n".join(
        [f"    let l{i} = subgroupMatrixLoad<{left}, row_major>(&{A_H}, (row + {16 * i}u) * kp + k0, kp);"
         for i in range(tile.fm)]
        + [f"    let r{j} = subgroupMatrixLoad<{right}, row_major>(&{B_H}, k0 * np + col + {16 * j}u, np);"
           for j in range(tile.fn)])
    products = "\n".join(f"    acc{i}_{j} = subgroupMatrixMultiplyAccumulate(l{i}, r{j}, acc{i}_{j});"
                         for i, j in frags)
    accumulators = "\n".join(f"  var acc{i}_{j} = subgroup_matrix_result<f32, 16, 16>();" for i, j in frags)
    stores = "\n".join(
        f"  subgroupMatrixStore<row_major>(&{C_F}, (row + {16 * i}u) * np + col + {16 * j}u, acc{i}_{j}, np);"
        for i, j in frags)
    return (
        "enable f16;\nenable subgroups;\nenable chromium_experimental_subgroup_matrix;\n"
        + _PARAMS
        + f"@group(0) @binding(4) var<storage, read> {A_H}: array<f16>;\n"
        f"@group(0) @binding(5) var<storage, read> {B_H}: array<f16>;\n"
        f"@group(0) @binding(6) var<storage, read_write> {C_F}: array<f32>;\n\n"
        f"@compute @workgroup_size({tile.threads}, 1, 1)\n"
        "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(subgroup_id) sid: u32) {\n"
        + _padded_sizes(tile)
        + f"  let row = wid.y * {bm}u + (sid / {tile.wn}u) * {tile.fm * FRAGMENT}u;\n"
        f"  let col = wid.x * {bn}u + (sid % {tile.wn}u) * {tile.fn * FRAGMENT}u;\n"
        f"{accumulators}\n"
        f"  for (var k0 = 0u; k0 < kp; k0 += {FRAGMENT}u) {{\n{loads}\n{products}\n  }}\n"
        f"{stores}\n"
        "}\n"
    )


def staged_mma_wgsl(tile: SubgroupMatrixTile) -> str:
    """Stage 2 of a staged tile: the workgroup copies A's ``bm x bk`` block and B's ``bk x bn`` from
    the f16 copies into workgroup memory a K step at a time, 8 f16 a load and a store
    (``vec4<u32>``), rows padded by STAGE_PAD, and each subgroup loads its fragments from there.
    Invocation ``li`` copies pieces ``li + i * threads`` row by row; with two buffers the next
    step's pieces are loaded into registers before this step's products and stored into the other
    buffer after them (one barrier a step), with one they are stored at the top of the step
    behind a barrier. Offsets into workgroup memory count ``vec4<u32>`` (8 f16)."""
    bm, bn = tile.block
    bk, fm, fn, threads = tile.bk, tile.fm, tile.fn, tile.threads
    ca, cb = bk // 8, bn // 8  # 16-byte pieces in a row of A's block and of B's
    if threads % ca or threads % cb or (bm * ca) % threads or (bk * cb) % threads:
        raise ValueError(f"{tile.name}: {threads} invocations do not tile its blocks' pieces")
    na, nb = bm * ca // threads, bk * cb // threads
    ra, rb = threads // ca, threads // cb  # rows of each block one pass of the workgroup copies
    sa, sb = (bk + STAGE_PAD) // 8, (bn + STAGE_PAD) // 8  # row strides, in vec4<u32>
    size_a, size_b = bm * sa, bk * sb  # one buffer of each
    registers = "\n".join([f"  var ga{i}: vec4<u32>;" for i in range(na)]
                          + [f"  var gb{i}: vec4<u32>;" for i in range(nb)])

    def fetch(k: str, pad: str) -> str:
        return "\n".join([f"{pad}ga{i} = {A_H}[a_src + {i * ra}u * k8 + ({k}) / 8u];" for i in range(na)]
                         + [f"{pad}gb{i} = {B_H}[b_src + ({k} + {i * rb}u) * n8];" for i in range(nb)])

    def stash(buffer: str, pad: str) -> str:
        return "\n".join([f"{pad}sa[{buffer} * {size_a}u + a_dst + {i * ra * sa}u] = ga{i};" for i in range(na)]
                         + [f"{pad}sb[{buffer} * {size_b}u + b_dst + {i * rb * sb}u] = gb{i};" for i in range(nb)])

    def products(buffer: str) -> str:
        left, right = "subgroup_matrix_left<f16, 16, 16>", "subgroup_matrix_right<f16, 16, 16>"
        steps = []
        for kk in range(0, bk, FRAGMENT):
            loads = ([f"      let l{i} = subgroupMatrixLoad<{left}, row_major>(&sa, {buffer} * {size_a}u + "
                      f"(sub_row + {16 * i}u) * {sa}u + {kk // 8}u, {sa}u);" for i in range(fm)]
                     + [f"      let r{j} = subgroupMatrixLoad<{right}, row_major>(&sb, {buffer} * {size_b}u + "
                        f"{kk * sb}u + (sub_col + {16 * j}u) / 8u, {sb}u);" for j in range(fn)])
            products = [f"      acc{i}_{j} = subgroupMatrixMultiplyAccumulate(l{i}, r{j}, acc{i}_{j});"
                        for i in range(fm) for j in range(fn)]
            steps.append("    {\n" + "\n".join(loads + products) + "\n    }")
        return "\n".join(steps)

    frags = [(i, j) for i in range(fm) for j in range(fn)]
    accumulators = "\n".join(f"  var acc{i}_{j} = subgroup_matrix_result<f32, 16, 16>();" for i, j in frags)
    stores = "\n".join(
        f"  subgroupMatrixStore<row_major>(&{C_F}, (row + {16 * i}u) * np + col + {16 * j}u, acc{i}_{j}, np);"
        for i, j in frags)
    if tile.buffers == 2:
        loop = f"""{fetch("0u", "  ")}
{stash("0u", "  ")}
  workgroupBarrier();
  var cur = 0u;
  for (var k0 = 0u; k0 < kp; k0 += {bk}u) {{
    let more = k0 + {bk}u < kp;
    if (more) {{
{fetch(f"k0 + {bk}u", "      ")}
    }}
{products("cur")}
    if (more) {{
{stash("(1u - cur)", "      ")}
    }}
    workgroupBarrier();  // this step's reads of cur and the next step's writes of the other are done
    cur = 1u - cur;
  }}"""
    else:
        loop = f"""{fetch("0u", "  ")}
  for (var k0 = 0u; k0 < kp; k0 += {bk}u) {{
{stash("0u", "    ")}
    workgroupBarrier();  // the step's blocks are in
    if (k0 + {bk}u < kp) {{
{fetch(f"k0 + {bk}u", "      ")}
    }}
{products("0u")}
    workgroupBarrier();  // every subgroup is done with them
  }}"""
    return (
        "enable f16;\nenable subgroups;\nenable chromium_experimental_subgroup_matrix;\n"
        + _PARAMS
        + f"@group(0) @binding(4) var<storage, read> {A_H}: array<vec4<u32>>;\n"
        f"@group(0) @binding(5) var<storage, read> {B_H}: array<vec4<u32>>;\n"
        f"@group(0) @binding(6) var<storage, read_write> {C_F}: array<f32>;\n"
        f"var<workgroup> sa: array<vec4<u32>, {tile.buffers * size_a}>;\n"
        f"var<workgroup> sb: array<vec4<u32>, {tile.buffers * size_b}>;\n\n"
        f"@compute @workgroup_size({threads}, 1, 1)\n"
        "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(subgroup_id) sid: u32,\n"
        "        @builtin(local_invocation_index) li: u32) {\n"
        + _padded_sizes(tile)
        + f"""  let grid_n = np / {bn}u;
  let id = wid.y * grid_n + wid.x;
  let first = id / ({LAUNCH_GROUP}u * grid_n) * {LAUNCH_GROUP}u;
  let rows = min(mp / {bm}u - first, {LAUNCH_GROUP}u);
  let within = id % ({LAUNCH_GROUP}u * grid_n);
  let block_row = (first + within % rows) * {bm}u;
  let block_col = within / rows * {bn}u;
  let sub_row = (sid / {tile.wn}u) * {fm * FRAGMENT}u;
  let sub_col = (sid % {tile.wn}u) * {fn * FRAGMENT}u;
  let row = block_row + sub_row;
  let col = block_col + sub_col;
  let k8 = kp / 8u;
  let n8 = np / 8u;
  let a_src = (block_row + li / {ca}u) * k8 + li % {ca}u;
  let b_src = (li / {cb}u) * n8 + block_col / 8u + li % {cb}u;
  let a_dst = (li / {ca}u) * {sa}u + li % {ca}u;
  let b_dst = (li / {cb}u) * {sb}u + li % {cb}u;
{registers}
{accumulators}
{loop}
{stores}
}}
"""
    )


def copy_out_wgsl(tile: SubgroupMatrixTile, dtype: str) -> str:
    """Stage 3: C (``dtype``) from ``c_f``, less the padding."""
    value = f"{C_F}[row * np + col]" if dtype == "f32" else f"f16({C_F}[row * np + col])"
    return (
        "enable f16;\n"
        f"@group(0) @binding(2) var<storage, read_write> c: array<{dtype}>;\n"
        + _PARAMS
        + f"@group(0) @binding(6) var<storage, read> {C_F}: array<f32>;\n\n"
        f"@compute @workgroup_size({COPY_WORKGROUP}, 1, 1)\n"
        "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,\n"
        "        @builtin(local_invocation_index) li: u32) {\n"
        f"  let i = (wid.y * groups.x + wid.x) * {COPY_WORKGROUP}u + li;\n"
        "  if (i >= p.m * p.n) { return; }\n"
        + f"  let np = (p.n + {tile.block[1] - 1}u) / {tile.block[1]}u * {tile.block[1]}u;\n"
        "  let row = i / p.n;\n"
        "  let col = i - row * p.n;\n"
        f"  c[i] = {value};\n"
        "}\n"
    )


def subgroup_matrix_wgsl(tile: SubgroupMatrixTile, dtype: str = "f32") -> tuple[str, str, str]:
    """The three stages' WGSL for ``dtype`` inputs and output (see the module doc)."""
    if dtype not in ("f32", "f16"):
        raise ValueError(f"dtype {dtype!r}: f32 or f16")
    return copy_in_wgsl(tile, dtype), mma_wgsl(tile), copy_out_wgsl(tile, dtype)


def subgroup_matrix_kernel(tile: SubgroupMatrixTile, dtype: str = "f32", **options) -> Kernel:
    """The candidate for ``tile`` with ``dtype`` A, B and C; ``options`` (group, priority) go to
    the candidate. It needs the device features :data:`FEATURES`."""
    copy_in, mma, copy_out = subgroup_matrix_wgsl(tile, dtype)

    def sizes(args: Args) -> tuple[int, int, int]:
        m, n, k = args.params[:3]
        return tile.padded(m, n, k)

    def copy_grid(args: Args) -> tuple[int, int, int]:
        mp, np_, kp = sizes(args)
        return wrapped_grid(ceil_div((mp * kp + kp * np_) // 4, COPY_WORKGROUP))

    def mma_grid(args: Args) -> tuple[int, int, int]:
        mp, np_, _ = sizes(args)
        bm, bn = tile.block
        return (np_ // bn, mp // bm, 1)

    def out_grid(args: Args) -> tuple[int, int, int]:
        return wrapped_grid(ceil_div(args.params[0] * args.params[1], COPY_WORKGROUP))

    scratch = {
        A_H: lambda args: 2 * sizes(args)[0] * sizes(args)[2],
        B_H: lambda args: 2 * sizes(args)[2] * sizes(args)[1],
        C_F: lambda args: 4 * sizes(args)[0] * sizes(args)[1],
    }
    stages = (
        Kernel(f"{tile.name}_mma", mma, grid=mma_grid, workgroup_size=(tile.threads, 1, 1),
               workgroup_storage=tile.workgroup_storage, features=FEATURES),
        Kernel(f"{tile.name}_out", copy_out, grid=out_grid, workgroup_size=(COPY_WORKGROUP, 1, 1),
               workgroup_storage=0, features=FEATURES),
    )
    return Kernel(tile.name, copy_in, grid=copy_grid, workgroup_size=(COPY_WORKGROUP, 1, 1), workgroup_storage=0,
                  features=FEATURES, then=stages, scratch=scratch, **options)
