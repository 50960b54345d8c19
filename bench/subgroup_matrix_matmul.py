"""How fast a matmul on Dawn's subgroup matrices runs (issue 31, item 3's first question): tensor
cores from WGSL, measured before any of it goes into wgtune.

``bench/coop_matrix_dawn.py`` found that PyPI's ``wgpudawn`` opens a device with
``chromium-experimental-subgroup-matrix`` on an H200 (toggles ``allow_unsafe_apis`` and
``vulkan_enable_f16_on_nvidia``) and that f16 -> f32 products are accumulated at full f32. This
asks whether such kernels are fast: tiled matmuls ``C[M, N] (f32) = A[M, K] @ B[K, N] (f16)``,
row-major, each subgroup owning ``fm x fn`` result matrices of 16x16, ``wm x wn`` subgroups a
workgroup, loading A and B from global memory (``staged=False``) or from workgroup memory that
the workgroup fills a K step of 32 at a time (``staged=True``). Each variant's output is checked
against float64 of the very f16 inputs, on a C that starts as NaN (an element never written fails),
then timed by wall clock over many launches in one submission; the f32 -> f16 copies an f32 matmul
would need are timed too. Beside them: torch's f16 matmul and its fp32 one with TF32 off and on,
each as a plain loop of launches and as a CUDA graph.

The first H200 run (``h200-subgroup-matrix-matmul.txt``) put the direct ``sgm1x1_f4x4`` at 71-74
TFLOP/s and those staged kernels (scalar f16 copies, two barriers a step) at 10-16. The ``Staged``
variants after them (index 8 on, names ``st<subgroups>_<block>_f<fragments>_k<K step>``) stage
well: 4 or 8 subgroups share a 128x128, 128x256 or 256x128 block; A and B are read as
``array<vec4<u32>>`` (8 f16 a load) and kept in workgroup arrays of ``vec4<u32>``, which
``subgroupMatrixLoad`` reads as f16 (offsets and strides count 16-byte elements; ``_h``: ``array<f16>``
filled one f16 at a time); rows padded by 16 bytes; ``_db`` double-buffered (step k + 1 loaded into
registers during step k's products, one barrier a step), else one buffer and two barriers; blocks
launched 8 block rows at a time (``_g1``: row by row). They take up to 37 KiB of workgroup storage:
the device is asked for the adapter's most, and a variant over the device's limit is skipped.

Run on a GPU machine with wgpudawn (and torch for the baselines)::

    python bench/subgroup_matrix_matmul.py                    # 2048^3, 4096^3, 8192x8192x4096
    python bench/subgroup_matrix_matmul.py --shape 4096x4096x4096 --variants 0:3
    python bench/subgroup_matrix_matmul.py --variants 8:      # the Staged variants alone
    python bench/subgroup_matrix_matmul.py --compile-only     # WGSL checked on Dawn's Null backend

``--compile-only`` compiles every variant's WGSL and pipeline on Dawn's Null backend
(``WGPU_BACKEND_TYPE=Null``), which validates the shader as Dawn's front end does but runs
nothing: what a machine without such a GPU can check. Null offers 16 KiB of workgroup storage: a
kernel over it has its module validated and its pipeline refused for that alone, with Dawn's count
of its bytes checked against the variant's. Shapes must be multiples of every variant's block
(M and N of 256, K of 64).
"""

from __future__ import annotations

import argparse
import os
import re
import struct
import subprocess
import sys
import time
from dataclasses import dataclass

FEATURE = "chromium-experimental-subgroup-matrix"
TOGGLES = ["allow_unsafe_apis", "vulkan_enable_f16_on_nvidia"]
FRAGMENT = 16  # the 16x16x16 f16 -> f32 configuration the H200 offers
STAGED_K = 32  # a staged workgroup's K step: two fragments deep
SHAPES = ((2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 4096))


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


def open_device(null: bool):
    import wgpudawn as wgpu
    from wgpudawn.backends.dawn import extras

    if null:
        os.environ["WGPU_BACKEND_TYPE"] = "Null"
    known = extras.all_toggles()
    extras.set_instance_extras(enable_toggles=[toggle for toggle in TOGGLES if toggle in known])
    print(f"toggles: {', '.join(toggle for toggle in TOGGLES if toggle in known)}")
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    if FEATURE not in adapter.features:
        raise SystemExit(f"{adapter.info.get('device')}: no {FEATURE} (features: {sorted(adapter.features)})")
    configs = extras.get_adapter_properties(adapter).get("subgroup_matrix_configs", [])
    wanted = [FEATURE, "shader-f16", "subgroups"]
    limits = {"max-compute-invocations-per-workgroup": adapter.limits["max-compute-invocations-per-workgroup"],
              "max-compute-workgroup-size-x": adapter.limits["max-compute-workgroup-size-x"],
              "max-compute-workgroup-storage-size": adapter.limits["max-compute-workgroup-storage-size"],
              "max-storage-buffer-binding-size": adapter.limits["max-storage-buffer-binding-size"],
              "max-buffer-size": adapter.limits["max-buffer-size"]}
    device = adapter.request_device_sync(required_features=wanted, required_limits=limits)
    subgroup = max((c["max_subgroup_size"] for c in configs), default=adapter.limits.get("max-subgroup-size", 128))
    return wgpu, adapter, device, configs, int(subgroup or 128)


def pipeline_for(device, code: str):
    module = device.create_shader_module(code=code)
    return device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})


def compile_only() -> int:
    """Every variant's WGSL and pipeline on Dawn's Null backend; 1 where any is refused.

    The Null adapter offers 16 KiB of workgroup storage, less than most staged kernels take: for those
    the shader module is built (WGSL parsed and validated) and the pipeline is refused for its storage
    alone, which counts as compiled where Dawn's count of the bytes is the variant's own."""
    _wgpu, adapter, device, _configs, widest = open_device(null=True)
    limit = adapter.limits["max-compute-invocations-per-workgroup"]
    storage = device.limits["max-compute-workgroup-storage-size"]
    print(f"Dawn {adapter.info.get('backend_type')} backend: workgroups of a multiple of {widest} invocations, "
          f"at most {limit}; {storage} bytes of workgroup storage")
    failed = 0
    for variant in ALL:
        # The H200's subgroups are 32 wide; the Null backend wants workgroups a multiple of its widest.
        fits = [size for size in (32, widest)
                if (variant.wm * variant.wn * size) % widest == 0 and variant.wm * variant.wn * size <= limit]
        if not fits:
            print(f"  {variant.name}: no subgroup size fits this adapter's limits: not compiled here")
            continue
        label = f"subgroups of {fits[0]}, {variant.workgroup_bytes} bytes of workgroup storage"
        try:
            pipeline_for(device, kernel(variant, fits[0]))
            print(f"  {variant.name}: compiled ({label})")
        except Exception as error:
            counted = re.search(r"total use of workgroup storage \((\d+) bytes\)", str(error))
            if counted and int(counted.group(1)) == variant.workgroup_bytes > storage:
                print(f"  {variant.name}: compiled ({label}: the module; the pipeline over Null's {storage} bytes)")
                continue
            failed += 1
            print(f"  {variant.name}: REFUSED {error}")
    # Twins of the staged kernels small enough for Null's workgroup storage: their whole pipelines.
    twins = (Staged(2, 2, 2, 2, bk=16), Staged(2, 2, 2, 2, bk=16, buffers=1), Staged(2, 2, 2, 2, bk=16, wide=False))
    for twin in twins:
        try:
            pipeline_for(device, kernel(twin, 32))
            print(f"  {twin.name} (a small twin, not timed): compiled ({twin.workgroup_bytes} bytes, the pipeline too)")
        except Exception as error:
            failed += 1
            print(f"  {twin.name} (a small twin, not timed): REFUSED {error}")
    pipeline_for(device, CONVERT)
    print("  f32 -> f16 copy: compiled")
    return 1 if failed else 0


class Runner:
    """One shape's buffers on the device, and the launches of one pipeline over them, timed."""

    def __init__(self, wgpu, device, m: int, n: int, k: int, seed: int = 0) -> None:
        import numpy as np

        self.device, self.shape = device, (m, n, k)
        rng = np.random.default_rng(seed)
        self.a32 = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        self.b32 = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        self.a16, self.b16 = self.a32.astype(np.float16), self.b32.astype(np.float16)
        usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        self.a = device.create_buffer_with_data(data=self.a16.tobytes(), usage=usage)
        self.b = device.create_buffer_with_data(data=self.b16.tobytes(), usage=usage)
        self.c = device.create_buffer(size=4 * m * n, usage=usage)
        self.a_src = device.create_buffer_with_data(data=self.a32.tobytes(), usage=usage)
        self.params = device.create_buffer_with_data(data=struct.pack("4I", m, n, k, 0),
                                                     usage=wgpu.BufferUsage.UNIFORM)
        self.count = device.create_buffer_with_data(data=struct.pack("4I", m * k, 0, 0, 0),
                                                    usage=wgpu.BufferUsage.UNIFORM)
        self.sync = device.create_buffer(size=16, usage=usage)

    def bind(self, pipeline, buffers) -> object:
        return self.device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=[
            {"binding": i, "resource": {"buffer": buf}} for i, buf in enumerate(buffers)])

    def launch(self, pipeline, group, grid: tuple[int, int], times: int) -> float:
        """Seconds a launch, by wall clock over ``times`` launches in one pass and one submission."""
        encoder = self.device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(pipeline)
        compute.set_bind_group(0, group)
        for _ in range(times):
            compute.dispatch_workgroups(*grid)
        compute.end()
        start = time.perf_counter()
        self.device.queue.submit([encoder.finish()])
        self.device.queue.read_buffer(self.sync)  # waits for the work before it
        return (time.perf_counter() - start) / times

    def timed(self, pipeline, group, grid: tuple[int, int]) -> float:
        once = self.launch(pipeline, group, grid, 3)
        times = max(5, min(2000, int(0.2 / max(once, 1e-7))))
        return min(self.launch(pipeline, group, grid, times) for _ in range(3))

    def check(self, pipeline, group, grid) -> str:
        """Run once on a C of NaN; the worst error over |a||b| against float64 of the f16 inputs."""
        import numpy as np

        m, n, _k = self.shape
        self.device.queue.write_buffer(self.c, 0, np.full(m * n, np.nan, dtype=np.float32).tobytes())
        self.launch(pipeline, group, grid, 1)
        got = np.frombuffer(self.device.queue.read_buffer(self.c), dtype=np.float32).reshape(m, n)
        rows = np.random.default_rng(1).choice(m, size=min(m, 256), replace=False)
        a, b = self.a16[rows].astype(np.float64), self.b16.astype(np.float64)
        want, scale = a @ b, np.abs(a) @ np.abs(b)
        if not np.isfinite(got).all():
            return f"WRONG: {int((~np.isfinite(got)).sum())} elements unwritten or not finite"
        worst = float(np.max(np.abs(got[rows] - want) / scale))
        return f"ok (error/sum|ab| {worst:.1e})" if worst < 1e-5 else f"WRONG: error/sum|ab| {worst:.1e}"


def torch_rates(m: int, n: int, k: int) -> dict[str, tuple[float, float]]:
    """TFLOP/s of torch's f16 matmul and its fp32 one (TF32 off, on): (plain loop, CUDA graph)."""
    try:
        import torch
    except ImportError:
        return {}
    flops, rates = 2 * m * n * k, {}
    for label, dtype, tf32 in (("torch f16", torch.float16, False), ("torch fp32", torch.float32, False),
                               ("torch fp32+TF32", torch.float32, True)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.rand(m, k, device="cuda", dtype=dtype)
        b = torch.rand(k, n, device="cuda", dtype=dtype)
        out = torch.empty(m, n, device="cuda", dtype=dtype)
        for _ in range(3):
            torch.matmul(a, b, out=out)
        torch.cuda.synchronize()
        reps = 20
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            torch.matmul(a, b, out=out)
        end.record()
        torch.cuda.synchronize()
        plain = start.elapsed_time(end) / 1e3 / reps
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            torch.matmul(a, b, out=out)
            with torch.cuda.graph(graph):
                for _ in range(reps):
                    torch.matmul(a, b, out=out)
        torch.cuda.synchronize()
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        graphed = start.elapsed_time(end) / 1e3 / reps
        rates[label] = (flops / plain / 1e12, flops / graphed / 1e12)
    torch.backends.cuda.matmul.allow_tf32 = False
    return rates


def measure(shapes, variants) -> None:
    wgpu, adapter, device, configs, subgroup = open_device(null=False)
    print(f"{adapter.info.get('device')} ({adapter.info.get('backend_type')}), subgroup size {subgroup}, "
          f"{device.limits['max-compute-workgroup-storage-size']} bytes of workgroup storage; "
          f"configs {[(c['m'], c['n'], c['k'], c['component_type'], c['result_component_type']) for c in configs]}")
    convert = pipeline_for(device, CONVERT)
    for m, n, k in shapes:
        runner = Runner(wgpu, device, m, n, k)
        flops = 2 * m * n * k
        print(f"\n{m}x{n}x{k}: f16 A, B -> f32 C")
        best = 0.0
        for variant in variants:
            bm, bn = variant.block
            if m % bm or n % bn or k % variant.k_step:
                print(f"  {variant.name:26s} skipped: the shape is no multiple of its {bm}x{bn}x{variant.k_step} block")
                continue
            threads = variant.wm * variant.wn * subgroup
            if threads > adapter.limits["max-compute-invocations-per-workgroup"]:
                print(f"  {variant.name:26s} skipped: {threads} invocations")
                continue
            if variant.workgroup_bytes > device.limits["max-compute-workgroup-storage-size"]:
                print(f"  {variant.name:26s} skipped: {variant.workgroup_bytes} bytes of workgroup storage, over the "
                      f"device's {device.limits['max-compute-workgroup-storage-size']}")
                continue
            try:
                pipeline = pipeline_for(device, kernel(variant, subgroup))
                group = runner.bind(pipeline, (runner.a, runner.b, runner.c, runner.params))
                grid = (n // bn, m // bm)
                verdict = runner.check(pipeline, group, grid)
                seconds = runner.timed(pipeline, group, grid)
            except Exception as error:
                print(f"  {variant.name:26s} FAILED {str(error).splitlines()[0][:200]}")
                continue
            rate = flops / seconds / 1e12
            if verdict.startswith("ok"):
                best = max(best, rate)
            print(f"  {variant.name:26s} {rate:7.1f} TFLOP/s  {seconds * 1e6:9.1f} us  {verdict}")
        group = runner.bind(convert, (runner.a_src, runner.a, runner.count))
        copy_a = runner.timed(convert, group, (min(65535, -(-m * k // 256)), -(-m * k // (256 * 65535))))
        copies = copy_a * (1 + n / m)  # B's copy: K x N elements against A's M x K, the same kernel
        print(f"  f32 -> f16 copies of A and B: {copies * 1e6:.1f} us (A's measured, B's scaled by size)")
        if best:
            print(f"  best correct: {best:.1f} TFLOP/s on f16 inputs; "
                  f"{flops / (flops / best / 1e12 + copies) / 1e12:.1f} TFLOP/s for f32 inputs with the copies")
        try:
            baselines = torch_rates(m, n, k)
        except Exception as error:  # the figures above stand without them
            print(f"  torch: {type(error).__name__}: {str(error)[:200]}")
            baselines = {}
        for label, (plain, graphed) in baselines.items():
            print(f"  {label:16s} {plain:7.1f} TFLOP/s plain, {graphed:7.1f} under a CUDA graph"
                  + (f"; best correct / this: {best / plain:.0%} plain, {best / graphed:.0%} graph" if best else ""))


def shape_of(text: str) -> tuple[int, int, int]:
    m, n, k = (int(part) for part in text.lower().split("x"))
    return m, n, k


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", action="append", type=shape_of, help="MxNxK (repeatable)")
    parser.add_argument("--variants", default=":",
                        help="a slice of the variants, START:STOP (0:8 the first kernels, 8: the staged ones)")
    parser.add_argument("--compile-only", action="store_true", help="check the WGSL on Dawn's Null backend")
    parser.add_argument("--toggle", action="append", default=[],
                        help="another Dawn toggle to enable (repeatable), e.g. disable_robustness")
    options = parser.parse_args(argv)
    TOGGLES.extend(options.toggle)
    try:
        import wgpudawn  # noqa: F401
    except ImportError:
        print("wgpudawn is not installed")
        return 2
    if options.compile_only:
        # The Null backend is chosen when Dawn's instance starts: a child process of its own.
        env = dict(os.environ, WGPU_BACKEND_TYPE="Null")
        return subprocess.run([sys.executable, __file__, "--null-child"], env=env).returncode
    start, _, stop = options.variants.partition(":")
    variants = ALL[int(start) if start else None:int(stop) if stop else None]
    try:
        measure(options.shape or SHAPES, variants)
    except RuntimeError as error:  # no adapter: Dawn says why
        print(f"no device: {error}")
        return 2
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--null-child"]:
        sys.exit(compile_only())
    sys.exit(main())
