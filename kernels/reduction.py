"""Row reductions: ``out[r] = sum(x[r, :])`` or ``max(x[r, :])`` of a row-major f32 ``x[rows, cols]``.

Call convention (see :class:`wgtune.Args`): buffers ``(x, out, scratch)`` at bindings 0, 1, 2,
then the params ``(rows, cols)`` as a uniform at binding 3. ``out`` holds ``rows`` f32;
``scratch`` holds at least :func:`scratch_elements` ``(rows, cols)`` f32, the partial results of
the two-pass candidates (the others leave it alone; with a smaller one the two-pass candidates
return wrong sums, as WebGPU clamps stores past a buffer). :func:`make_reduction_args` builds such a
call with seeded inputs. One set per operation: ``reduction_set("sum")`` is the set
``"row_sum"``, ``reduction_set("max")`` the set ``"row_max"``.

Candidates differ in how a row is spread over invocations, and in how their partial results
are combined:

- ``row_*`` (group ``one_pass``): one workgroup per row. Its invocations stride over the row,
  each keeping ``unroll`` independent accumulators of f32 or vec4 loads, then combine: either a
  tree in workgroup memory (``tree``) or ``subgroupAdd`` / ``subgroupMax`` followed by a small
  workgroup-memory step over one value per subgroup (``sg``).
- ``split_*`` (group ``two_pass``): for a few long rows. Stage 1 runs several workgroups per
  row, each reducing a chunk of ``chunk`` elements into ``scratch``; stage 2 (the candidate's
  ``then``) runs one workgroup per row over that row's partials and writes ``out``.
- ``pack_*`` (group ``multi_row``): for many short rows. A workgroup handles ``workgroup / g``
  rows, ``g`` invocations a row: ``g = 1`` sums a row in one invocation; larger ``g`` combine in
  workgroup memory (``tree``) or, for ``g = 4``, with ``subgroupShuffleXor`` (``shuffle``).

The vec4 candidates bind ``x`` as ``array<vec4<f32>>``, so they need ``cols % 4 == 0`` (every
row then starts on a vec4): the key records it (``"vec"``: 4 or 1) and the plan skips vec4
candidates on keys without it. Workgroups are laid out on a 2-D grid, row-major over
``num_workgroups.x``, because WebGPU allows at most 65535 workgroups per dimension.

Subgroups. The ``sg`` and ``shuffle`` candidates need the ``"subgroups"`` device feature (where
it is missing they are refused by name, and the others run). They assume what every driver we
know does for a 1-D workgroup, though WGSL does not promise it: subgroups are consecutive runs
of ``local_invocation_index`` (so ``local_invocation_index / subgroup_size`` numbers them and
``subgroupShuffleXor(v, 1u or 2u)`` reaches the neighbours in the same aligned four). WGSL
requires the directive ``enable subgroups;`` (browsers enforce it) and the candidates carry it;
naga in wgpu-py 0.32 refuses it while accepting the builtins, so the native backend drops it.

Numerics. Candidates add in different orders, so sums differ by rounding; the ``row_sum`` set's
tolerance is :data:`SUM_RTOL` relative plus :data:`SUM_ATOL` absolute (see there). ``max`` is
exact: every candidate returns an element of the row, so ``row_max`` compares exactly. A row of
negative numbers, or of ``-inf``, has its true maximum (accumulators start from an element of
the row, never from a made-up identity); an empty row (``cols == 0``) sums to 0 and has maximum
``-inf``. NaN: sums propagate it (IEEE addition does), ``max`` does not promise to (WGSL's
``max`` of a NaN is indeterminate: a candidate may return the NaN or the other operand), and
neither does a GPU running with fast math.

Seen on lavapipe (Mesa 22.3's llvmpipe, the adapter of the tests): it ends an invocation's
loops, silently, once they have run 65535 iterations in total (its guard against endless
loops), so a candidate whose invocations loop more than that returns a wrong result there: a
one-pass candidate on rows longer than ``65535 * workgroup * width * unroll``, a ``pack`` one
on rows longer than ``65535 * g * width``. lavapipe binds at most 128 MiB of ``x`` (2**25 f32),
so candidate 0 (67 million columns) is always right there, and the plan's regimes keep the
others clear of the cap (two passes for few long rows, ``pack`` skipped on long rows). GPUs have
no such cap.

Pure Python, standard library only, like every kernel family: it also runs in Pyodide.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from wgtune import Args, Group, Kernel, TunableSet, anchor
from wgtune.key import Key

from .inputs import random_floats

__all__ = [
    "GROUPS",
    "MIN_CHUNK",
    "OPS",
    "REDUCTION_VARIANTS",
    "SUM_ATOL",
    "SUM_RTOL",
    "ReductionVariant",
    "make_reduction_args",
    "reduction_kernel",
    "reduction_key",
    "reduction_set",
    "row_max_reference",
    "row_max_set",
    "row_sum_reference",
    "row_sum_set",
    "scratch_elements",
]

# Workgroups along x before the grid wraps onto y (WebGPU's per-dimension limit is 65535).
GRID_ROW = 32768
# WebGPU guarantees subgroups of at least 4 invocations: the per-subgroup slots a workgroup needs.
MIN_SUBGROUP = 4
F32_BYTES = 4
# The smallest chunk a two-pass candidate may have: scratch_elements (a partial per chunk) uses it.
MIN_CHUNK = 4096

# The regimes that decide which group is benchmarked first (anchored sizes, so per key):
# rows of at most MULTI_ROW_MAX_COLS -> multi_row; at most TWO_PASS_MAX_ROWS rows of at least
# TWO_PASS_MIN_COLS -> two_pass; otherwise one_pass. The tune measures only the first batch in
# which something ran (plus candidate 0, always in the first batch), so these pick the regime;
# the other groups follow (priority 0) only where every candidate of the first failed.
MULTI_ROW_MAX_COLS = 256
# Past this many columns (anchored) the multi_row group is skipped: an invocation or a few per
# long row is never the pick (and it is what lavapipe's loop cap cuts short).
MULTI_ROW_SKIP_COLS = 4096
TWO_PASS_MAX_ROWS = 256
TWO_PASS_MIN_COLS = 8192

# The row_sum tolerance: |got - want| <= SUM_ATOL + SUM_RTOL * |want|, want from candidate 0.
# Reordering an f32 sum of n terms changes it by rounding errors that, for data without a
# systematic bias, grow like a random walk: about sqrt(n) * 2**-24 relative to the sum, which for
# n up to 2**28 is SUM_RTOL = 2**-10. SUM_ATOL is for sums that cancel (rounding error follows
# the terms, not the sum). Simulated in numpy on one row of 2**28 terms, in the orders of
# candidate 0, of row_f32_wg64 (chains of 2**22 terms) and of split_vec4x2_wg256_c65536:
# random-sign terms of magnitude in [0.5, 1) (the seeded inputs) agree within 6e-6 relative and
# 0.02 absolute; uniform [0, 1) terms within 6e-6 relative. SUM_ATOL = 2**-5 covers that 0.02
# and stays far below 0.5, so a candidate that drops or repeats a seeded term still fails the
# check on all but huge rows. Not a bound: terms of equal value round with a bias, and 2**28
# copies of 0.1 give sums 5% apart (1% off for candidate 0); such checks can fail honestly.
SUM_RTOL = 2.0**-10
SUM_ATOL = 2.0**-5


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def _grid(groups: int) -> tuple[int, int, int]:
    """``groups`` workgroups, wrapped onto y past ``GRID_ROW``."""
    if groups <= GRID_ROW:
        return (groups, 1, 1)
    return (GRID_ROW, _ceil_div(groups, GRID_ROW), 1)


# -- operations --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """How one operation combines values in WGSL (``{a}``, ``{b}``: operands; ``{v}``: a vec4)."""

    name: str
    combine: str
    fold4: str
    subgroup: str
    zero: str | None  # the identity, where one can be written; None: start from an element


OPS: dict[str, Op] = {
    "sum": Op("sum", "{a} + {b}", "({v}.x + {v}.y) + ({v}.z + {v}.w)", "subgroupAdd", "0.0"),
    "max": Op("max", "max({a}, {b})", "max(max({v}.x, {v}.y), max({v}.z, {v}.w))", "subgroupMax", None),
}


def _op(op: str) -> Op:
    if op not in OPS:
        raise ValueError(f"unknown reduction {op!r}: choose one of {', '.join(OPS)}")
    return OPS[op]


# -- variants ----------------------------------------------------------------------------------

LAYOUTS = ("row", "split", "pack")
COMBINES = ("tree", "sg", "shuffle", "none")


@dataclass(frozen=True)
class ReductionVariant:
    """One candidate's shape.

    ``layout``: ``row`` (a workgroup per row), ``split`` (two passes through scratch) or ``pack``
    (``g`` invocations per row, ``workgroup / g`` rows per workgroup). ``width`` 1 (f32 loads)
    or 4 (vec4 loads); ``unroll`` independent accumulators per invocation; ``combine`` how the
    invocations of a row (or chunk) meet: ``tree`` (workgroup memory), ``sg`` (subgroup
    operations, then workgroup memory), ``shuffle`` (``pack`` with ``g = 4``: subgroup shuffles),
    ``none`` (``pack`` with ``g = 1``). ``chunk``: elements per stage-1 workgroup (``split``).
    """

    layout: str
    workgroup: int
    width: int = 1
    unroll: int = 1
    combine: str = "tree"
    g: int = 0
    chunk: int = 0

    def __post_init__(self) -> None:
        def bad(why: str) -> ValueError:
            return ValueError(f"{self}: {why}")

        if self.layout not in LAYOUTS or self.combine not in COMBINES:
            raise bad(f"layout must be one of {LAYOUTS}, combine one of {COMBINES}")
        if self.width not in (1, 4) or self.unroll < 1:
            raise bad("width must be 1 or 4 and unroll >= 1")
        if self.workgroup < MIN_SUBGROUP or self.workgroup & (self.workgroup - 1):
            raise bad("workgroup must be a power of two >= 4")
        if self.layout == "pack":
            if self.g < 1 or self.g & (self.g - 1) or self.g > self.workgroup:
                raise bad("g must be a power of two within the workgroup")
            allowed = ("none",) if self.g == 1 else ("tree", "shuffle") if self.g <= MIN_SUBGROUP else ("tree",)
            if self.combine not in allowed:
                raise bad(f"g = {self.g} combines with {' or '.join(map(repr, allowed))}")
        elif self.combine not in ("tree", "sg"):
            raise bad(f"layout {self.layout!r} combines with 'tree' or 'sg'")
        if self.layout == "split":
            step = self.workgroup * self.width * self.unroll
            if self.chunk < MIN_CHUNK or self.chunk % step:
                raise bad(f"chunk must be >= MIN_CHUNK ({MIN_CHUNK}) and a multiple of workgroup * width * unroll")
        elif self.chunk:
            raise bad("only split candidates have a chunk")

    @property
    def subgroups(self) -> bool:
        return self.combine in ("sg", "shuffle")

    @property
    def name(self) -> str:
        loads = ("f32" if self.width == 1 else "vec4") + (f"x{self.unroll}" if self.unroll > 1 else "")
        if self.layout == "row":
            return f"row_{loads}_wg{self.workgroup}_{self.combine}"
        if self.layout == "split":
            return f"split_{loads}_wg{self.workgroup}_c{self.chunk}_{self.combine}"
        combine = "" if self.combine == "none" else f"_{self.combine}"
        return f"pack_{loads}_g{self.g}_wg{self.workgroup}{combine}"

    @property
    def workgroup_storage(self) -> int:
        """Bytes of ``var<workgroup>``: one f32 per invocation for a tree, per subgroup for ``sg``."""
        if self.combine == "tree":
            return F32_BYTES * self.workgroup
        if self.combine == "sg":
            return F32_BYTES * (self.workgroup // MIN_SUBGROUP)
        return 0


# Candidate 0 is the plainest safe one: f32 loads, a workgroup of 256 per row (WebGPU's default
# limit), a tree in workgroup memory. Four loads a step, so that on lavapipe its invocations
# loop at most 65535 times (see above) on any row it can bind (2**25 f32): it stays right there.
REDUCTION_VARIANTS: tuple[ReductionVariant, ...] = (
    ReductionVariant("row", 256, unroll=4),
    # one pass, tree
    ReductionVariant("row", 64),
    ReductionVariant("row", 128),
    ReductionVariant("row", 256),
    ReductionVariant("row", 512),
    ReductionVariant("row", 128, unroll=4),
    ReductionVariant("row", 64, width=4),
    ReductionVariant("row", 128, width=4),
    ReductionVariant("row", 256, width=4),
    ReductionVariant("row", 512, width=4),
    ReductionVariant("row", 128, width=4, unroll=2),
    ReductionVariant("row", 256, width=4, unroll=2),
    # one pass, subgroups
    ReductionVariant("row", 64, combine="sg"),
    ReductionVariant("row", 256, combine="sg"),
    ReductionVariant("row", 256, unroll=4, combine="sg"),
    ReductionVariant("row", 64, width=4, combine="sg"),
    ReductionVariant("row", 128, width=4, combine="sg"),
    ReductionVariant("row", 256, width=4, combine="sg"),
    ReductionVariant("row", 512, width=4, combine="sg"),
    ReductionVariant("row", 256, width=4, unroll=2, combine="sg"),
    # two passes
    ReductionVariant("split", 256, chunk=4096),
    ReductionVariant("split", 256, unroll=4, chunk=16384),
    ReductionVariant("split", 64, width=4, chunk=4096),
    ReductionVariant("split", 256, width=4, chunk=16384),
    ReductionVariant("split", 256, width=4, unroll=2, chunk=65536),
    ReductionVariant("split", 256, chunk=8192, combine="sg"),
    ReductionVariant("split", 256, width=4, chunk=16384, combine="sg"),
    ReductionVariant("split", 256, width=4, unroll=2, chunk=65536, combine="sg"),
    # several rows per workgroup
    ReductionVariant("pack", 64, g=1, combine="none"),
    ReductionVariant("pack", 256, g=1, combine="none"),
    ReductionVariant("pack", 64, width=4, g=1, combine="none"),
    ReductionVariant("pack", 256, g=4),
    ReductionVariant("pack", 256, g=8),
    ReductionVariant("pack", 256, g=16),
    ReductionVariant("pack", 256, g=32),
    ReductionVariant("pack", 256, width=4, g=4),
    ReductionVariant("pack", 256, g=4, combine="shuffle"),
    ReductionVariant("pack", 256, width=4, g=4, combine="shuffle"),
)


# -- WGSL --------------------------------------------------------------------------------------


def _header(element: str, directive: bool) -> str:
    return ("enable subgroups;\n" if directive else "") + (
        f"@group(0) @binding(0) var<storage, read> x: array<{element}>;\n"
        "@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n"
        "@group(0) @binding(2) var<storage, read_write> scratch: array<f32>;\n"
        "struct Params { rows: u32, cols: u32 }\n"
        "@group(0) @binding(3) var<uniform> p: Params;\n"
    )


# Layout "auto" binds only what a stage uses, and the call binds all four: a stage that needs no
# scratch (or no x) touches it in a branch that never runs (0 rows dispatch no workgroup at all).
_TOUCH_SCRATCH = "  if (p.rows == 0u) { scratch[0] = 0.0; }  // binds scratch for layout auto; never runs\n"
_TOUCH_X = "  if (p.rows == 0u) { out[0] = x[0]; }  // binds x for layout auto; never runs\n"
_TOUCH_OUT = "  if (p.rows == 0u) { out[0] = 0.0; }  // binds out for layout auto; never runs\n"


def _signature(workgroup: int, subgroups: bool) -> str:
    extra = (
        ",\n        @builtin(subgroup_size) sg_size: u32,\n        @builtin(subgroup_invocation_id) lane: u32"
        if subgroups
        else ""
    )
    return (
        f"@compute @workgroup_size({workgroup}, 1, 1)\n"
        "fn main(@builtin(workgroup_id) wid: vec3<u32>,\n"
        "        @builtin(num_workgroups) groups: vec3<u32>,\n"
        f"        @builtin(local_invocation_index) lid: u32{extra}) {{\n"
        "  let group = wid.y * groups.x + wid.x;\n"
    )


def _combine(op: Op, a: str, b: str) -> str:
    return op.combine.format(a=a, b=b)


def _accumulate(op: Op, width: int, unroll: int, start: str, count: str, thread: str, stride: int,
                source: str = "x") -> str:
    """Code leaving in ``acc`` (f32) this invocation's part: elements ``start + thread + k * stride``
    below ``start + count`` of ``source``, ``unroll`` loads a step. Elements are in units of the
    source's type (f32 or vec4). Max starts from ``source[start]``, the first element of the
    range (the range is never empty where the result is used, and robust access covers the rest)."""
    element = "f32" if width == 1 else "vec4<f32>"
    init = f"{source}[{start}]"  # max starts from an element
    if op.zero is not None:
        init = op.zero if width == 1 else f"vec4<f32>({op.zero})"
    lines = [f"  var a{u}: {element} = {init};\n" for u in range(unroll)]
    lines.append(f"  var i = {thread};\n")
    if unroll > 1:
        lines.append(f"  for (; i + {(unroll - 1) * stride}u < {count}; i += {unroll * stride}u) {{\n")
        for u in range(unroll):
            offset = f" + {u * stride}u" if u else ""
            lines.append(f"    a{u} = {_combine(op, f'a{u}', f'{source}[{start} + i{offset}]')};\n")
        lines.append("  }\n")
    lines.append(f"  for (; i < {count}; i += {stride}u) {{ a0 = {_combine(op, 'a0', f'{source}[{start} + i]')}; }}\n")
    total = "a0"
    for u in range(1, unroll):
        total = _combine(op, total, f"a{u}")
    if width == 4:
        lines.append(f"  let v = {total};\n")
        total = op.fold4.format(v="v")
    lines.append(f"  let acc = {total};\n")
    return "".join(lines)


def _finish(op: Op, value: str) -> str:
    """The row's result from ``value``: for max, ``-inf`` where the row is empty."""
    if op.name == "max":
        # -inf built at run time (a constant infinity is a WGSL error); only selected if cols == 0.
        return f"select({value}, bitcast<f32>(0xff800000u | p.cols), p.cols == 0u)"
    return value


def _tree(op: Op, thread: str, span: int) -> str:
    """A tree over ``span`` consecutive slots of ``partial`` (``thread``: the index among them)
    leaving their result in the first; every invocation of the workgroup takes part."""
    lines = ["  partial[lid] = acc;\n  workgroupBarrier();\n"]
    step = span // 2
    while step >= 1:
        merged = _combine(op, "partial[lid]", f"partial[lid + {step}u]")
        lines.append(f"  if ({thread} < {step}u) {{ partial[lid] = {merged}; }}\n")
        if step > 1:  # the first slot's invocation reads its own last write: no barrier after it
            lines.append("  workgroupBarrier();\n")
        step //= 2
    return "".join(lines)


def _workgroup_combine(op: Op, combine: str, workgroup: int, store: str) -> str:
    """Combine ``acc`` over the workgroup; invocation 0 then runs ``store`` with ``result``."""
    if combine == "tree":
        lines = [_tree(op, "lid", workgroup)]
        lines.append(f"  if (lid == 0u) {{\n    let result = partial[0];\n    {store}\n  }}\n")
        return "".join(lines)
    # sg: a value per subgroup in workgroup memory, then every subgroup folds them (uniform
    # control flow for the subgroup operation), and invocation 0 stores.
    start = op.zero if op.zero is not None else "partial[0]"
    return (
        f"  let mine = {op.subgroup}(acc);\n"
        "  if (lane == 0u) { partial[lid / sg_size] = mine; }\n"
        "  workgroupBarrier();\n"
        f"  let subgroup_count = ({workgroup}u + sg_size - 1u) / sg_size;\n"
        f"  var t = {start};\n"
        f"  for (var k = lane; k < subgroup_count; k += sg_size) {{ t = {_combine(op, 't', 'partial[k]')}; }}\n"
        f"  let result = {op.subgroup}(t);\n"
        f"  if (lid == 0u) {{ {store} }}\n"
    )


def _shared(variant_combine: str, workgroup: int) -> str:
    if variant_combine == "tree":
        return f"var<workgroup> partial: array<f32, {workgroup}>;\n\n"
    if variant_combine == "sg":
        return f"var<workgroup> partial: array<f32, {workgroup // MIN_SUBGROUP}>;\n\n"
    return "\n"


def _row_wgsl(op: Op, v: ReductionVariant, directive: bool) -> str:
    element = "f32" if v.width == 1 else "vec4<f32>"
    count = "p.cols" if v.width == 1 else "(p.cols / 4u)"
    return (
        _header(element, directive and v.subgroups)
        + _shared(v.combine, v.workgroup)
        + _signature(v.workgroup, v.subgroups)
        + _TOUCH_SCRATCH
        + "  let row = group;\n"
        "  if (row >= p.rows) { return; }\n"
        f"  let count = {count};\n"
        "  let start = row * count;\n"
        + _accumulate(op, v.width, v.unroll, "start", "count", "lid", v.workgroup)
        + _workgroup_combine(op, v.combine, v.workgroup, f"out[row] = {_finish(op, 'result')};")
        + "}\n"
    )


def _split_wgsl(op: Op, v: ReductionVariant, directive: bool) -> str:
    """Stage 1: workgroup ``g`` reduces chunk ``g % chunks`` of row ``g / chunks`` into scratch[g]."""
    element = "f32" if v.width == 1 else "vec4<f32>"
    per_chunk = v.chunk // v.width
    count = "p.cols" if v.width == 1 else "(p.cols / 4u)"
    return (
        _header(element, directive and v.subgroups)
        + _shared(v.combine, v.workgroup)
        + _signature(v.workgroup, v.subgroups)
        + _TOUCH_OUT
        + f"  let chunks = (p.cols + {v.chunk - 1}u) / {v.chunk}u;\n"
        "  if (group >= p.rows * chunks) { return; }\n"
        "  let row = group / chunks;\n"
        "  let chunk = group % chunks;\n"
        f"  let count = {count};\n"
        f"  let begin = chunk * {per_chunk}u;\n"
        "  let start = row * count + begin;\n"
        f"  let length = min(count - begin, {per_chunk}u);\n"
        + _accumulate(op, v.width, v.unroll, "start", "length", "lid", v.workgroup)
        + _workgroup_combine(op, v.combine, v.workgroup, "scratch[group] = result;")
        + "}\n"
    )


def _split_final_wgsl(op: Op, v: ReductionVariant, directive: bool) -> str:
    """Stage 2: workgroup ``row`` reduces the row's partials in scratch into ``out[row]``."""
    return (
        _header("f32", directive and v.subgroups)
        + _shared(v.combine, v.workgroup)
        + _signature(v.workgroup, v.subgroups)
        + _TOUCH_X
        + "  let row = group;\n"
        "  if (row >= p.rows) { return; }\n"
        f"  let chunks = (p.cols + {v.chunk - 1}u) / {v.chunk}u;\n"
        "  let start = row * chunks;\n"
        + _accumulate(op, 1, 1, "start", "chunks", "lid", v.workgroup, source="scratch")
        + _workgroup_combine(op, v.combine, v.workgroup, f"out[row] = {_finish(op, 'result')};")
        + "}\n"
    )


def _pack_wgsl(op: Op, v: ReductionVariant, directive: bool) -> str:
    """``g`` invocations per row; rows past the end still take part (barriers, shuffles), idle."""
    element = "f32" if v.width == 1 else "vec4<f32>"
    rows_per_group = v.workgroup // v.g
    count = "p.cols" if v.width == 1 else "(p.cols / 4u)"
    lines = [
        _header(element, directive and v.subgroups),
        _shared(v.combine, v.workgroup),
        _signature(v.workgroup, v.subgroups),
        _TOUCH_SCRATCH,
        f"  let row = group * {rows_per_group}u + lid / {v.g}u;\n",
        f"  let t = lid % {v.g}u;\n" if v.g > 1 else "  let t = 0u;\n",
        f"  let count = select(0u, {count}, row < p.rows);\n",
        f"  let start = row * {count};\n",
        _accumulate(op, v.width, v.unroll, "start", "count", "t", v.g),
    ]
    store = f"out[row] = {_finish(op, 'result')};"
    if v.combine == "none":
        lines.append(f"  if (row < p.rows) {{\n    let result = acc;\n    {store}\n  }}\n")
    elif v.combine == "shuffle":
        lines.append("  var result = acc;\n")
        mask = 1
        while mask < v.g:
            lines.append(f"  result = {_combine(op, 'result', f'subgroupShuffleXor(result, {mask}u)')};\n")
            mask *= 2
        lines.append(f"  if (t == 0u && row < p.rows) {{ {store} }}\n")
    else:
        lines.append(_tree(op, "t", v.g))
        lines.append(f"  if (t == 0u && row < p.rows) {{\n    let result = partial[lid];\n    {store}\n  }}\n")
    lines.append("}\n")
    return "".join(lines)


# -- kernels, key, set -------------------------------------------------------------------------

ONE_PASS_PRIORITY = 1
FIRST = 2  # a group's priority where its regime matches the key; 0 elsewhere (fallback order)


def _dims(key: Key) -> tuple[int, int]:
    fields = dict(key)
    return int(fields.get("rows", 1)), int(fields.get("cols", 1))


def _multi_row_priority(key: Key) -> int:
    _, cols = _dims(key)
    if cols > MULTI_ROW_SKIP_COLS:
        return -1
    return FIRST if cols <= MULTI_ROW_MAX_COLS else 0


def _two_pass_priority(key: Key) -> int:
    rows, cols = _dims(key)
    return FIRST if rows <= TWO_PASS_MAX_ROWS and cols >= TWO_PASS_MIN_COLS else 0


GROUPS: dict[str, Group] = {
    "row": Group("one_pass", ONE_PASS_PRIORITY),
    "split": Group("two_pass", _two_pass_priority),
    "pack": Group("multi_row", _multi_row_priority),
}


def _vec4_priority(key: Key) -> int:
    """Skip (-1) a vec4 candidate on keys whose cols it cannot cover."""
    return 0 if dict(key).get("vec", 1) == 4 else -1


def reduction_kernel(op: str, variant: ReductionVariant, *, subgroup_directive: bool = True,
                     group: Group | None = None) -> Kernel:
    """The candidate for ``variant`` of ``op`` (``"sum"`` or ``"max"``), in ``group``."""
    spec = _op(op)
    features = ("subgroups",) if variant.subgroups else ()
    size = (variant.workgroup, 1, 1)
    priority = _vec4_priority if variant.width == 4 else 0
    if variant.layout == "row":
        return Kernel(
            variant.name, _row_wgsl(spec, variant, subgroup_directive), grid=lambda args: _grid(args.params[0]),
            workgroup_size=size, workgroup_storage=variant.workgroup_storage, priority=priority, group=group,
            features=features,
        )
    if variant.layout == "pack":
        rows_per_group = variant.workgroup // variant.g
        return Kernel(
            variant.name, _pack_wgsl(spec, variant, subgroup_directive),
            grid=lambda args: _grid(_ceil_div(args.params[0], rows_per_group)),
            workgroup_size=size, workgroup_storage=variant.workgroup_storage, priority=priority, group=group,
            features=features,
        )
    chunk = variant.chunk
    final = Kernel(
        variant.name + "_final", _split_final_wgsl(spec, variant, subgroup_directive),
        grid=lambda args: _grid(args.params[0]), workgroup_size=size,
        workgroup_storage=variant.workgroup_storage, features=features,
    )
    return Kernel(
        variant.name, _split_wgsl(spec, variant, subgroup_directive),
        grid=lambda args: _grid(args.params[0] * _ceil_div(args.params[1], chunk)),
        workgroup_size=size, workgroup_storage=variant.workgroup_storage, priority=priority, group=group,
        features=features, then=(final,),
    )


def scratch_elements(rows: int, cols: int) -> int:
    """The f32 elements ``scratch`` needs for ``rows x cols``: a partial per chunk of the
    smallest chunk (:data:`MIN_CHUNK`) of any two-pass candidate; at least 1."""
    return max(1, rows * _ceil_div(cols, MIN_CHUNK))


def reduction_key(op: str) -> Callable[[Args], dict[str, object]]:
    """The key function of ``op``'s set: rows and cols anchored to powers of two, the op, and
    ``vec``: 4 where ``cols % 4 == 0`` (vec4 candidates can serve the call), else 1."""
    _op(op)

    def key(args: Args) -> dict[str, object]:
        rows, cols = args.params[:2]
        return {"rows": anchor(rows), "cols": anchor(cols), "op": op, "vec": 4 if cols % 4 == 0 else 1,
                "dtype": "f32"}

    return key


def reduction_set(op: str, variants: Sequence[ReductionVariant] = REDUCTION_VARIANTS, *,
                  subgroup_directive: bool = True) -> TunableSet:
    """The set ``row_{op}``: candidate 0 (``variants[0]``, no group) first, then the others in
    their layout's group. ``subgroup_directive``: put ``enable subgroups;`` in the WGSL of the
    subgroup candidates (browsers need it; naga in wgpu-py 0.32 refuses it)."""
    spec = _op(op)
    candidates = [
        reduction_kernel(op, variant, subgroup_directive=subgroup_directive,
                         group=None if index == 0 else GROUPS[variant.layout])
        for index, variant in enumerate(variants)
    ]
    exact = spec.zero is None  # max returns an element of the row: every candidate agrees exactly
    return TunableSet(
        f"row_{op}", candidates, key=reduction_key(op), outputs=(1,),
        atol=0.0 if exact else SUM_ATOL, rtol=0.0 if exact else SUM_RTOL,
    )


def row_sum_set(**options: Any) -> TunableSet:
    return reduction_set("sum", **options)


def row_max_set(**options: Any) -> TunableSet:
    return reduction_set("max", **options)


# -- inputs and references ---------------------------------------------------------------------

INPUT_BLOCK = 1 << 22  # values of x made from one seed by make_reduction_args


def make_reduction_args(device: Any, size: tuple[int, int], op: str, seed: int = 0) -> Args:
    """Buffers ``(x, out, scratch)`` for ``x[rows, cols]`` with seeded inputs; params ``(rows, cols)``.

    The values are those of :func:`wgtune.kernels.inputs.random_floats` (magnitudes in [0.5, 1),
    random signs), made in blocks of ``INPUT_BLOCK`` values with a seed each: one call of it
    cannot make 2**26 values or more (``random.randbytes`` takes at most 2**31 bits).
    """
    _op(op)
    rows, cols = size
    count = rows * cols
    x = array("f")
    for block, begin in enumerate(range(0, count, INPUT_BLOCK)):
        x.extend(random_floats(min(INPUT_BLOCK, count - begin), seed=f"reduce-{op}-{rows}x{cols}-{seed}-{block}"))
    buffers = (
        device.create_buffer(x.tobytes()),
        device.create_buffer(size=F32_BYTES * rows),
        device.create_buffer(size=F32_BYTES * scratch_elements(rows, cols)),
    )
    return Args(buffers, (rows, cols))


def _rows(x: Sequence[float], rows: int, cols: int) -> list[Sequence[float]]:
    if len(x) < rows * cols:
        raise ValueError(f"x has {len(x)} values, {rows} x {cols} needs {rows * cols}")
    return [x[r * cols : (r + 1) * cols] for r in range(rows)]


def row_sum_reference(x: Sequence[float], rows: int, cols: int) -> list[float]:
    """Each row's sum, correctly rounded to a double (``math.fsum``); 0.0 for an empty row."""
    return [math.fsum(row) for row in _rows(x, rows, cols)]


def row_max_reference(x: Sequence[float], rows: int, cols: int) -> list[float]:
    """Each row's maximum; ``-inf`` for an empty row; NaN where the row has one (the kernels
    may or may not propagate it)."""
    result = []
    for row in _rows(x, rows, cols):
        if any(math.isnan(value) for value in row):
            result.append(math.nan)
        else:
            result.append(max(row, default=-math.inf))
    return result
