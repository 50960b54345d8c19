"""The kernels ``bench/subgroup_matrix_matmul.py`` measures: tiled f16 matmuls on Dawn's subgroup
matrices, as WGSL (that script's doc says what each variant is and what the H200 made of them).

``VARIANTS`` load A and B straight from global memory; ``STAGED`` stage a K step in workgroup
memory that 4 to 16 subgroups share; ``ALL`` is both, in the order ``--variants`` slices;
:func:`kernel` gives a variant's WGSL for a subgroup size; ``CONVERT`` is the f32 -> f16 copy.
"""

from __future__ import annotations

from dataclasses import dataclass

FRAGMENT = 16  # the 16x16x16 f16 -> f32 configuration the H200 offers
STAGED_K = 32  # a staged workgroup's K step: two fragments deep


@dataclass(frozen=True)
class Variant:
    """``wm x wn`` subgroups a workgroup, each ``fm x fn`` result fragments of 16x16."""

    wm: int
    wn: int
    fm: int
    fn: int
    staged: bool = False

    @property
    def block(self) -> tuple[int, int]:
        return self.wm * self.fm * FRAGMENT, self.wn * self.fn * FRAGMENT

    @property
    def k_step(self) -> int:
        return STAGED_K  # the direct kernels step by 16, but their shapes were held to 32 as the staged ones

    @property
    def workgroup_bytes(self) -> int:
        bm, bn = self.block
        return 2 * STAGED_K * (bm + bn) if self.staged else 0

    @property
    def name(self) -> str:
        return f"sgm{self.wm}x{self.wn}_f{self.fm}x{self.fn}" + ("_staged" if self.staged else "")


VARIANTS = (
    Variant(1, 1, 2, 2), Variant(1, 1, 4, 4), Variant(2, 2, 2, 2), Variant(2, 2, 4, 2), Variant(2, 4, 2, 2),
    Variant(2, 2, 2, 2, staged=True), Variant(2, 2, 4, 4, staged=True), Variant(4, 2, 2, 4, staged=True),
)


def _loads(count: int, side: str, buffer: str, offset: str, stride: str) -> str:
    """``count`` fragment loads ``l0, l1, ...`` (``side`` "left") or ``r0, ...`` ("right") from
    ``buffer``; ``offset`` holds ``{s}``, the fragment's first row (left) or column (right)."""
    return "\n".join(
        f"      let {side[0]}{i} = subgroupMatrixLoad<subgroup_matrix_{side}<f16, 16, 16>>("
        f"&{buffer}, {offset.format(s=16 * i)}, false, {stride});" for i in range(count))


def wgsl(variant: Variant, subgroup: int) -> str:
    """The kernel: params ``(M, N, K)`` at binding 3; grid ``(N / block_n, M / block_m)``."""
    bm, bn = variant.block
    threads = variant.wm * variant.wn * subgroup
    frags = [(i, j) for i in range(variant.fm) for j in range(variant.fn)]
    accs = "\n".join(f"  var acc{i}_{j} = subgroup_matrix_result<f32, 16, 16>();" for i, j in frags)
    mma = "\n".join(f"      acc{i}_{j} = subgroupMatrixMultiplyAccumulate(l{i}, r{j}, acc{i}_{j});" for i, j in frags)
    stores = "\n".join(
        f"  subgroupMatrixStore(&c, (row + {16 * i}u) * p.y + col + {16 * j}u, acc{i}_{j}, false, p.y);"
        for i, j in frags)
    if variant.staged:  # fragments from the workgroup's copies of A (bm x 32) and B (32 x bn)
        step = "\n".join((_loads(variant.fm, "left", "sa", f"(sub_row + {{s}}u) * {STAGED_K}u + kk", f"{STAGED_K}u"),
                          _loads(variant.fn, "right", "sb", f"kk * {bn}u + sub_col + {{s}}u", f"{bn}u"), mma))
        shared = (f"var<workgroup> sa: array<f16, {bm * STAGED_K}>;\n"
                  f"var<workgroup> sb: array<f16, {STAGED_K * bn}>;\n")
        loop = f"""  for (var k0 = 0u; k0 < p.z; k0 += {STAGED_K}u) {{
    for (var e = li; e < {bm * STAGED_K}u; e += {threads}u) {{
      sa[e] = a[(block_row + e / {STAGED_K}u) * p.z + k0 + e % {STAGED_K}u];
    }}
    for (var e = li; e < {STAGED_K * bn}u; e += {threads}u) {{
      sb[e] = b[(k0 + e / {bn}u) * p.y + block_col + e % {bn}u];
    }}
    workgroupBarrier();
    for (var kk = 0u; kk < {STAGED_K}u; kk += 16u) {{
{step}
    }}
    workgroupBarrier();
  }}"""
    else:  # fragments straight from A and B
        step = "\n".join((_loads(variant.fm, "left", "a", "(row + {s}u) * p.z + k0", "p.z"),
                          _loads(variant.fn, "right", "b", "k0 * p.y + col + {s}u", "p.y"), mma))
        shared = ""
        loop = f"""  for (var k0 = 0u; k0 < p.z; k0 += 16u) {{
{step}
  }}"""
    return f"""enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
@group(0) @binding(0) var<storage, read> a: array<f16>;
@group(0) @binding(1) var<storage, read> b: array<f16>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> p: vec4<u32>;
{shared}
@compute @workgroup_size({threads})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(subgroup_id) sid: u32,
        @builtin(local_invocation_index) li: u32) {{
  let block_row = wg.y * {bm}u;
  let block_col = wg.x * {bn}u;
  let sub_row = (sid / {variant.wn}u) * {variant.fm * 16}u;
  let sub_col = (sid % {variant.wn}u) * {variant.fn * 16}u;
  let row = block_row + sub_row;
  let col = block_col + sub_col;
{accs}
{loop}
{stores}
}}
"""


@dataclass(frozen=True)
class Staged:
    """``wm x wn`` subgroups a workgroup, each ``fm x fn`` fragments of 16x16, sharing A's block
    (``bm x bk``) and B's (``bk x bn``) in workgroup memory, ``buffers`` (1 or 2) deep. Global loads
    and workgroup stores take 8 f16 at a time (``vec4<u32>``); rows are padded by 8 f16 (16 bytes)
    against bank conflicts. ``wide=False`` keeps the workgroup arrays ``array<f16>`` and stores the 8
    f16 one by one; ``group`` block rows share B's blocks in launch order (1: plain row order)."""

    wm: int
    wn: int
    fm: int
    fn: int
    bk: int = 32
    buffers: int = 2
    wide: bool = True
    group: int = 8

    @property
    def block(self) -> tuple[int, int]:
        return self.wm * self.fm * FRAGMENT, self.wn * self.fn * FRAGMENT

    @property
    def k_step(self) -> int:
        return self.bk

    @property
    def strides(self) -> tuple[int, int]:
        """Rows of A's and B's blocks in workgroup memory, in f16: 8 more than their width."""
        return self.bk + PAD, self.block[1] + PAD

    @property
    def workgroup_bytes(self) -> int:
        bm, _bn = self.block
        sa, sb = self.strides
        return 2 * self.buffers * (bm * sa + self.bk * sb)

    @property
    def name(self) -> str:
        bm, bn = self.block
        return (f"st{self.wm * self.wn}_{bm}x{bn}_f{self.fm}x{self.fn}_k{self.bk}"
                + ("_db" if self.buffers == 2 else "") + ("" if self.wide else "_h")
                + ("" if self.group == 8 else f"_g{self.group}"))


PAD = 8  # f16 a workgroup row is padded by: 16 bytes, so that 8 rows of a fragment start on 8 bank groups
STAGED = (
    Staged(2, 2, 4, 4), Staged(2, 2, 4, 4, buffers=1), Staged(2, 2, 4, 4, wide=False), Staged(2, 2, 4, 4, group=1),
    Staged(2, 2, 4, 4, bk=16), Staged(4, 2, 2, 4), Staged(2, 4, 4, 4, bk=16), Staged(4, 2, 4, 4, bk=16),
    Staged(4, 2, 2, 4, bk=64, buffers=1),
    # After the first H200 run (single buffers led): larger blocks and K steps, single-buffered.
    Staged(2, 2, 4, 4, bk=64, buffers=1), Staged(2, 4, 4, 4, bk=32, buffers=1), Staged(4, 2, 4, 4, bk=32, buffers=1),
    Staged(4, 2, 2, 4, bk=32, buffers=1), Staged(2, 4, 4, 2, bk=64, buffers=1), Staged(4, 4, 2, 2, bk=64, buffers=1),
)


def staged_wgsl(variant: Staged, subgroup: int) -> str:
    """The kernel for ``variant``: bindings and grid as ``wgsl``'s (``(N / block_n, M / block_m)``).

    Each invocation copies ``na`` 16-byte pieces of A's block and ``nb`` of B's a K step: the piece
    ``li + i * threads``, row by row. With two buffers, the pieces of step k + 1 are loaded into
    registers before step k's products and stored into the other buffer after them, then one barrier;
    with one, they are stored at the top of the step, behind a barrier, and loaded for the next step
    before the products. Offsets into workgroup memory count its elements: ``vec4<u32>`` (8 f16)
    where ``wide``, else f16."""
    bm, bn = variant.block
    bk, fm, fn = variant.bk, variant.fm, variant.fn
    threads = variant.wm * variant.wn * subgroup
    unit = 8 if variant.wide else 1  # f16 in one workgroup element
    ca, cb = bk // 8, bn // 8  # 16-byte pieces in a row of A's block and of B's
    if threads % ca or threads % cb or (bm * ca) % threads or (bk * cb) % threads or bk % 16:
        raise ValueError(f"{variant.name}: {threads} invocations do not tile its blocks' pieces")
    na, nb = bm * ca // threads, bk * cb // threads
    ra, rb = threads // ca, threads // cb  # rows of A's block, of B's, that one pass of the workgroup copies
    sa, sb = (stride // unit for stride in variant.strides)
    size_a, size_b = bm * sa, bk * sb  # one buffer of each, in workgroup elements
    element = "vec4<u32>" if variant.wide else "f16"
    regs = "\n".join([f"  var ga{i}: vec4<u32>;" for i in range(na)] + [f"  var gb{i}: vec4<u32>;" for i in range(nb)])

    def fetch(k: str, pad: str) -> str:  # the pieces of the step starting at K index ``k`` into registers
        return "\n".join([f"{pad}ga{i} = a[a_src + {i * ra}u * k8 + ({k}) / 8u];" for i in range(na)]
                         + [f"{pad}gb{i} = b[b_src + ({k} + {i * rb}u) * n8];" for i in range(nb)])

    def put(array: str, dst: str, reg: str, pad: str) -> list[str]:
        if variant.wide:
            return [f"{pad}{array}[{dst}] = {reg};"]
        lines = [f"{pad}{{ let d = {dst};"]
        for w, part in enumerate("xyzw"):
            lines.append(f"{pad}  let h{part} = bitcast<vec2<f16>>({reg}.{part});")
            lines.append(f"{pad}  {array}[d + {2 * w}u] = h{part}.x; {array}[d + {2 * w + 1}u] = h{part}.y;")
        return [*lines, f"{pad}}}"]

    def stash(buf: str, pad: str) -> str:  # the registers into workgroup buffer ``buf`` (an expression)
        lines = []
        for i in range(na):
            lines += put("sa", f"{buf} * {size_a}u + a_dst + {i * ra * sa}u", f"ga{i}", pad)
        for i in range(nb):
            lines += put("sb", f"{buf} * {size_b}u + b_dst + {i * rb * sb}u", f"gb{i}", pad)
        return "\n".join(lines)

    def products(buf: str) -> str:  # the subgroup's fragments over one K step from buffer ``buf``
        left, right = "subgroup_matrix_left<f16, 16, 16>", "subgroup_matrix_right<f16, 16, 16>"
        steps = []
        for kk in range(0, bk, 16):
            loads = ([f"      let l{i} = subgroupMatrixLoad<{left}, row_major>(&sa, {buf} * {size_a}u + "
                      f"(sub_row + {16 * i}u) * {sa}u + {kk // unit}u, {sa}u);" for i in range(fm)]
                     + [f"      let r{j} = subgroupMatrixLoad<{right}, row_major>(&sb, {buf} * {size_b}u + "
                        f"{kk * sb}u + (sub_col + {16 * j}u){f' / {unit}u' if unit > 1 else ''}, {sb}u);"
                        for j in range(fn)])
            mma = [f"      acc{i}_{j} = subgroupMatrixMultiplyAccumulate(l{i}, r{j}, acc{i}_{j});"
                   for i in range(fm) for j in range(fn)]
            steps.append("    {\n" + "\n".join(loads + mma) + "\n    }")
        return "\n".join(steps)

    frags = [(i, j) for i in range(fm) for j in range(fn)]
    accs = "\n".join(f"  var acc{i}_{j} = subgroup_matrix_result<f32, 16, 16>();" for i, j in frags)
    stores = "\n".join(
        f"  subgroupMatrixStore<row_major>(&c, (row + {16 * i}u) * p.y + col + {16 * j}u, acc{i}_{j}, p.y);"
        for i, j in frags)
    if variant.buffers == 2:
        loop = f"""{fetch("0u", "  ")}
{stash("0u", "  ")}
  workgroupBarrier();
  var cur = 0u;
  for (var k0 = 0u; k0 < p.z; k0 += {bk}u) {{
    let more = k0 + {bk}u < p.z;
    if (more) {{
{fetch(f"k0 + {bk}u", "      ")}
    }}
{products("cur")}
    if (more) {{
{stash("(1u - cur)", "      ")}
    }}
    workgroupBarrier();  // step k's reads of cur and step k + 1's writes of the other are done
    cur = 1u - cur;
  }}"""
    elif variant.buffers == 1:
        loop = f"""{fetch("0u", "  ")}
  for (var k0 = 0u; k0 < p.z; k0 += {bk}u) {{
{stash("0u", "    ")}
    workgroupBarrier();  // the step's blocks are in
    if (k0 + {bk}u < p.z) {{
{fetch(f"k0 + {bk}u", "      ")}
    }}
{products("0u")}
    workgroupBarrier();  // every subgroup is done with them
  }}"""
    else:
        raise ValueError(f"{variant.name}: 1 or 2 buffers")
    return f"""enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
@group(0) @binding(0) var<storage, read> a: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> p: vec4<u32>;
// {variant.buffers} buffer(s) of A's {bm}x{bk} block and B's {bk}x{bn}, rows padded to {sa} and {sb} {element}
var<workgroup> sa: array<{element}, {variant.buffers * size_a}>;
var<workgroup> sb: array<{element}, {variant.buffers * size_b}>;

@compute @workgroup_size({threads})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(subgroup_id) sid: u32,
        @builtin(local_invocation_index) li: u32) {{
  // Blocks in launch order, {variant.group} block rows at a time: neighbours share B's blocks in L2.
  let grid_n = p.y / {bn}u;
  let id = wg.y * grid_n + wg.x;
  let first = id / ({variant.group}u * grid_n) * {variant.group}u;
  let rows = min(p.x / {bm}u - first, {variant.group}u);
  let within = id % ({variant.group}u * grid_n);
  let block_row = (first + within % rows) * {bm}u;
  let block_col = within / rows * {bn}u;
  let sub_row = (sid / {variant.wn}u) * {fm * 16}u;
  let sub_col = (sid % {variant.wn}u) * {fn * 16}u;
  let row = block_row + sub_row;
  let col = block_col + sub_col;
  let k8 = p.z / 8u;
  let n8 = p.y / 8u;
  // This invocation's pieces: A's block row li / {ca} (+ {ra} a pass), piece li % {ca}; B's row li / {cb} (+ {rb}).
  let a_src = (block_row + li / {ca}u) * k8 + li % {ca}u;
  let b_src = (li / {cb}u) * n8 + block_col / 8u + li % {cb}u;
  let a_dst = (li / {ca}u) * {sa}u + (li % {ca}u) * {8 // unit}u;
  let b_dst = (li / {cb}u) * {sb}u + (li % {cb}u) * {8 // unit}u;
{regs}
{accs}
{loop}
{stores}
}}
"""


ALL = VARIANTS + STAGED  # --variants slices this: 0:8 the first kernels, 8: the staged ones


def kernel(variant: Variant | Staged, subgroup: int) -> str:
    return staged_wgsl(variant, subgroup) if isinstance(variant, Staged) else wgsl(variant, subgroup)


CONVERT = """enable f16;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f16>;
@group(0) @binding(2) var<uniform> p: vec4<u32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = g.x + g.y * 65535u * 256u;
  if (i < p.x) { y[i] = f16(x[i]); }
}
"""
