"""vec4 tiles for sizes they cannot read directly: a first stage copies A or B into scratch whose
rows start on a vec4, then the tile runs on the copies.

vec4 loads need every row of the matrix they read to start on a vec4: A's rows (K floats) where K
is a multiple of 4, B's and C's (N floats) where N is. On a key where one is not, the vec4 tiles
are skipped (``keys.needs_vec4``) and only the flat tiles are left, which load one float at a
time: on an H200 those reached 55-76% of torch on shapes of that kind where the vec4 tiles of the
same size reached 88-95% on aligned ones (``bench/results/h200-shapes-matmul-771203.txt``).

A tile with ``copy`` (:class:`~wgtune.kernels.matmul.tile.MatmulTile`) is a candidate of two
stages (a kgrid tile's stage that zeroes C comes between them; ``"c"`` adds a last one):

1. the copy: ``"a"`` copies A (``M x K``) into ``a_pad`` (``M x K4``, K4 = K rounded up to 4, the
   extra columns zero), ``"b"`` copies B (``K x N``) into ``b_pad`` (``K x N4``, likewise), ``"ab"``
   both, in one dispatch that writes a vec4 an invocation (scratch the device makes:
   ``Kernel(scratch=...)``). Every element of the copies is written on every call: scratch may
   hold another candidate's data.
2. the tile (``<name>_tile``), the vector layout's own code reading the copies as vec4 with their
   row strides (``ld_a``, ``ld_b``); loads past K or past N are still zero by the tile's guards,
   so the zero columns only make whole vec4 of the last ones. With B copied, C (N no multiple of
   4) is stored one float at a time, each guarded against N, as the flat tiles store it.

Which form a key plans (``keys.copy_priority``): ``"a"`` where only K is no multiple of 4,
``"b"`` where only N is, ``"ab"`` where both; none where vec4 loads serve the call directly.
``"bc"``/``"abc"`` store C into an aligned copy ``c_pad`` (vec4 stores), which a last stage copies
into C.

On the H200 (2026-12-02, ``bench/results/h200-padded-probe.txt``): copies of A alone, where N
lets the tile load B and store C as vec4, beat the flat tiles by 10-22 points of torch
(1926x2352x90 82% against 62%, 5567x5700x255 95% against 73%); copies of B, with C stored a
float at a time, lost to them on most shapes by 5-30 points and won on a few large ones
(3001x2999x1001 81-83% against 72-79%), and C through an aligned copy did no better than the
scalar stores. So the set holds copies of A in two medium tiles and the large 128x256 one,
and copies of B in the 64x128 and 128x256 tiles only.
"""

from __future__ import annotations

from wgtune import Args, Kernel

from ..common import F32_BYTES, ceil_div, wrapped_grid
from .tile import MatmulTile
from .vector import _VectorKernel
from .zeroing import zero_stage

__all__ = ["COPY_WORKGROUP", "copied_bytes", "copy_wgsl", "padded_kernel", "padded_tile_wgsl"]

COPY_WORKGROUP = 256
A_PAD, B_PAD, C_PAD = "a_pad", "b_pad", "c_pad"  # the scratch buffers' WGSL names
_K4, _N4 = "((p.k + 3u) & ~3u)", "((p.n + 3u) & ~3u)"


def copied_bytes(matrix: str, m: int, n: int, k: int) -> int:
    """Bytes of the copy of A (``"a"``: ``m x K4``), of B (``"b"``: ``k x N4``) or of C (``"c"``:
    ``m x N4``)."""
    rows, width = {"a": (m, k), "b": (k, n), "c": (m, n)}[matrix]
    return F32_BYTES * rows * ceil_div(width, 4) * 4


def _copy_rows(source: str, target: str, rows: str, width: str, last: bool) -> str:
    """WGSL that writes vec4 ``q`` of ``target`` (``rows`` rows of ``width`` floats rounded up to
    a vec4) from ``source`` (rows of ``width`` floats), zero past ``width``; unless ``last``, an
    invocation past it goes on to the next matrix, ``q`` counted from there."""
    return (
        f"  let {source}_quads = ({width} + 3u) / 4u;\n"
        f"  if (q < {rows} * {source}_quads) {{\n"
        f"    let row = q / {source}_quads;\n"
        f"    let col = (q - row * {source}_quads) * 4u;\n"
        f"    let at = row * {width} + col;\n"
        "    var v = vec4<f32>();\n"
        f"    if (col + 4u <= {width}) {{\n"
        f"      v = vec4<f32>({source}[at], {source}[at + 1u], {source}[at + 2u], {source}[at + 3u]);\n"
        "    } else {  // the row's last vec4: one to three floats, the rest zero\n"
        f"      v.x = {source}[at];\n"
        f"      if (col + 1u < {width}) {{ v.y = {source}[at + 1u]; }}\n"
        f"      if (col + 2u < {width}) {{ v.z = {source}[at + 2u]; }}\n"
        "    }\n"
        f"    {target}[q] = v;\n"
        "    return;\n"
        "  }\n"
        + ("" if last else f"  q -= {rows} * {source}_quads;\n")
    )


def copy_wgsl(copy: str) -> str:
    """The first stage: A into ``a_pad`` and/or B into ``b_pad`` (``copy``), one vec4 an
    invocation, the copy of A's vec4 first and then B's along one flat index."""
    lines = []
    if "a" in copy:
        lines.append("@group(0) @binding(0) var<storage, read> a: array<f32>;\n")
    if "b" in copy:
        lines.append("@group(0) @binding(1) var<storage, read> b: array<f32>;\n")
    lines.append("struct Params { m: u32, n: u32, k: u32 }\n@group(0) @binding(3) var<uniform> p: Params;\n")
    if "a" in copy:
        lines.append(f"@group(0) @binding(4) var<storage, read_write> {A_PAD}: array<vec4<f32>>;\n")
    if "b" in copy:
        lines.append(f"@group(0) @binding(5) var<storage, read_write> {B_PAD}: array<vec4<f32>>;\n")
    lines.append(
        f"\n@compute @workgroup_size({COPY_WORKGROUP}, 1, 1)\n"
        "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,\n"
        "        @builtin(local_invocation_index) li: u32) {\n"
        f"  var q = (wid.y * groups.x + wid.x) * {COPY_WORKGROUP}u + li;\n"
    )
    if "a" in copy:
        lines.append(_copy_rows("a", A_PAD, "p.m", "p.k", last=copy == "a"))
    if "b" in copy:
        lines.append(_copy_rows("b", B_PAD, "p.k", "p.n", last=True))
    lines.append("}\n")
    return "".join(lines)


def copy_out_wgsl() -> str:
    """The last stage of a tile that stores into ``c_pad`` (rows of N4): C from it, a float an
    invocation."""
    return (
        "@group(0) @binding(2) var<storage, read_write> c: array<f32>;\n"
        "struct Params { m: u32, n: u32, k: u32 }\n@group(0) @binding(3) var<uniform> p: Params;\n"
        f"@group(0) @binding(6) var<storage, read> {C_PAD}: array<f32>;\n\n"
        f"@compute @workgroup_size({COPY_WORKGROUP}, 1, 1)\n"
        "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,\n"
        "        @builtin(local_invocation_index) li: u32) {\n"
        f"  let i = (wid.y * groups.x + wid.x) * {COPY_WORKGROUP}u + li;\n"
        "  if (i >= p.m * p.n) { return; }\n"
        f"  c[i] = {C_PAD}[i + i / p.n * ({_N4} - p.n)];\n"
        "}\n"
    )


class _CopiedOperands(_VectorKernel):
    """The vector layout reading ``a_pad`` (rows of K4) where A was copied, ``b_pad`` (rows of
    N4) where B was, and storing C one float at a time where B was (N is no multiple of 4)."""

    def __init__(self, tile: MatmulTile) -> None:
        super().__init__(tile, "f32")
        if "a" in tile.copy:
            self.a_name, self.lda = A_PAD, "ld_a"
        if "b" in tile.copy:
            self.b_name, self.ldb, self.c_vec4 = B_PAD, "ld_b", False
        if "c" in tile.copy:
            self.c_name, self.ldc, self.c_vec4 = C_PAD, "ld_b", True

    def setup(self) -> str:
        strides = f"  let ld_a = {_K4};\n" if "a" in self.tile.copy else ""
        strides += f"  let ld_b = {_N4};\n" if "b" in self.tile.copy else ""
        return strides + super().setup()

    def wgsl(self) -> str:
        """The vector layout's code with A and B bound as the copies, and C as floats where B was
        copied (a kgrid tile's C is atomic floats already)."""
        text = super().wgsl()
        copy = self.tile.copy
        for copied, old, new in (
            ("a" in copy, "@binding(0) var<storage, read> a: array<vec4<f32>>;",
             f"@binding(4) var<storage, read> {A_PAD}: array<vec4<f32>>;"),
            ("b" in copy, "@binding(1) var<storage, read> b: array<vec4<f32>>;",
             f"@binding(5) var<storage, read> {B_PAD}: array<vec4<f32>>;"),
            ("b" in copy and not self.tile.splits_k, "@binding(2) var<storage, read_write> c: array<vec4<f32>>;",
             f"@binding(6) var<storage, read_write> {C_PAD}: array<vec4<f32>>;" if "c" in copy
             else "@binding(2) var<storage, read_write> c: array<f32>;"),
        ):
            if copied:
                if text.count(old) != 1:
                    raise AssertionError(f"{self.tile.name}: the vector layout no longer declares {old!r}")
                text = text.replace(old, new)
        return text


def padded_tile_wgsl(tile: MatmulTile) -> str:
    """The second stage of a tile with ``copy``: the tile on the copies (f32)."""
    return _CopiedOperands(tile).wgsl()


def padded_kernel(tile: MatmulTile, dtype: str, features: tuple[str, ...], **options) -> Kernel:
    """The candidate for a tile with ``copy``: the copy, then (a kgrid tile) a stage that zeroes
    C, then the tile as the stage ``<name>_tile``; ``options`` (group, priority) go to the
    candidate."""
    if dtype != "f32":
        raise ValueError(f"{tile.name}: copies are f32 (the f16 set has none)")

    def copy_grid(args: Args) -> tuple[int, int, int]:
        m, n, k = args.params[:3]
        quads = sum(copied_bytes(matrix, m, n, k) for matrix in tile.copy if matrix != "c") // (4 * F32_BYTES)
        return wrapped_grid(ceil_div(quads, COPY_WORKGROUP))

    def out_grid(args: Args) -> tuple[int, int, int]:
        return wrapped_grid(ceil_div(args.params[0] * args.params[1], COPY_WORKGROUP))

    def tile_grid(args: Args) -> tuple[int, int, int]:
        return tile.grid(*args.params[:3])

    scratch = {
        name: (lambda args, matrix=matrix: copied_bytes(matrix, *args.params[:3]))
        for matrix, name in (("a", A_PAD), ("b", B_PAD), ("c", C_PAD)) if matrix in tile.copy
    }
    stages = [Kernel(f"{tile.name}_tile", padded_tile_wgsl(tile), grid=tile_grid, workgroup_size=tile.workgroup_size,
                     workgroup_storage=tile.workgroup_storage, features=features)]
    if tile.splits_k:  # its chunks add into C
        stages.insert(0, zero_stage(f"{tile.name}_zero", features))
    if "c" in tile.copy:
        stages.append(Kernel(f"{tile.name}_out", copy_out_wgsl(), grid=out_grid, workgroup_size=(COPY_WORKGROUP, 1, 1),
                             workgroup_storage=0, features=features))
    return Kernel(tile.name, copy_wgsl(tile.copy), grid=copy_grid, workgroup_size=(COPY_WORKGROUP, 1, 1),
                  workgroup_storage=0, features=features, then=tuple(stages), scratch=scratch, **options)
