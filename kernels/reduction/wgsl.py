"""WGSL generators of the reduction family (see :mod:`wgtune.kernels.reduction` for the sets).

``out[r] = sum(x[r, :])`` or ``max(x[r, :])`` of a row-major f32 ``x[rows, cols]``: the call's
buffers ``(x, out)`` at bindings 0, 1, params ``(rows, cols)`` as a uniform at binding 2, and for
the two-pass candidates their partials, :data:`SCRATCH`, at binding 3: a scratch buffer the
device makes (``Kernel(scratch=...)``), which the call neither gives nor counts.
An :class:`Op` says how one operation combines values in WGSL (:data:`OPS`: ``sum``, ``max``); a
:class:`ReductionVariant` is one candidate's shape; :func:`row_wgsl`, :func:`pack_wgsl` and the
two stages :func:`split_wgsl`, :func:`split_final_wgsl` generate the code of its layout. Each
stage declares only the bindings it uses (:func:`_header`): a pipeline's layout "auto" holds only
those, and wgtune binds in each stage what that stage declares.

Max never starts from a made-up identity: accumulators start from an element of the range, and
an empty row's ``-inf`` is built at run time (a constant infinity is a WGSL error).

Subgroups. The ``sg`` and ``shuffle`` variants use subgroup operations and assume what every
driver we know does for a 1-D workgroup, though WGSL does not promise it: subgroups are
consecutive runs of ``local_invocation_index`` (so ``local_invocation_index / subgroup_size``
numbers them and ``subgroupShuffleXor(v, 1u or 2u)`` reaches the neighbours in the same aligned
four). Their WGSL starts with the directive ``enable subgroups;``, which WGSL requires (browsers
enforce it); naga in wgpu-py 0.32 refuses it while accepting the builtins, so the native backend
drops it before compiling.

Pure Python, standard library only, like every kernel family: it also runs in Pyodide.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..common import F32_BYTES, SUBGROUPS_DIRECTIVE

__all__ = [
    "MIN_CHUNK",
    "MIN_SUBGROUP",
    "OPS",
    "SCRATCH",
    "Op",
    "ReductionVariant",
    "pack_wgsl",
    "reduction_op",
    "row_wgsl",
    "split_final_wgsl",
    "split_wgsl",
    "subgroup_wgsl",
]

# WebGPU guarantees subgroups of at least 4 invocations: the per-subgroup slots a workgroup needs.
MIN_SUBGROUP = 4
# The smallest chunk a two-pass candidate may have: scratch_elements (a partial per chunk) uses it.
MIN_CHUNK = 4096
# The WGSL name of the two-pass candidates' partials: their Kernel(scratch=...) buffer.
SCRATCH = "scratch"


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


def reduction_op(op: str) -> Op:
    """The :class:`Op` named ``op`` (``"sum"`` or ``"max"``); a ValueError for any other."""
    if op not in OPS:
        raise ValueError(f"unknown reduction {op!r}: choose one of {', '.join(OPS)}")
    return OPS[op]


# -- variants ----------------------------------------------------------------------------------

LAYOUTS = ("row", "split", "pack", "subgroup")
COMBINES = ("tree", "sg", "shuffle", "none")


@dataclass(frozen=True)
class ReductionVariant:
    """One candidate's shape.

    ``layout``: ``row`` (a workgroup per row), ``split`` (two passes through scratch), ``pack``
    (``g`` invocations per row, ``workgroup / g`` rows per workgroup) or ``subgroup`` (a subgroup
    per row, whatever its size: combine ``sg``, no workgroup memory and no barrier). ``width`` 1 (f32 loads)
    or 4 (vec4 loads: ``masked`` ones serve any ``cols``, plain ones need ``cols % 4 == 0``, see
    :mod:`wgtune.kernels.reduction.masked`); ``unroll`` independent accumulators per invocation; ``combine`` how the
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
    masked: bool = False

    def __post_init__(self) -> None:
        def bad(why: str) -> ValueError:
            return ValueError(f"{self}: {why}")

        if self.layout not in LAYOUTS or self.combine not in COMBINES:
            raise bad(f"layout must be one of {LAYOUTS}, combine one of {COMBINES}")
        if self.width not in (1, 4) or self.unroll < 1:
            raise bad("width must be 1 or 4 and unroll >= 1")
        if self.masked and self.width != 4:
            raise bad("masked loads are vec4 loads: width must be 4")
        if self.workgroup < MIN_SUBGROUP or self.workgroup & (self.workgroup - 1):
            raise bad("workgroup must be a power of two >= 4")
        if self.layout == "pack":
            if self.g < 1 or self.g & (self.g - 1) or self.g > self.workgroup:
                raise bad("g must be a power of two within the workgroup")
            allowed = ("none",) if self.g == 1 else ("tree", "shuffle") if self.g <= MIN_SUBGROUP else ("tree",)
            if self.combine not in allowed:
                raise bad(f"g = {self.g} combines with {' or '.join(map(repr, allowed))}")
        elif self.layout == "subgroup":
            if self.combine != "sg" or self.masked:
                raise bad("layout 'subgroup' combines with 'sg' and has no masked loads")
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
        loads = ("f32" if self.width == 1 else "vec4m" if self.masked else "vec4")
        loads += f"x{self.unroll}" if self.unroll > 1 else ""
        if self.layout == "row":
            return f"row_{loads}_wg{self.workgroup}_{self.combine}"
        if self.layout == "split":
            return f"split_{loads}_wg{self.workgroup}_c{self.chunk}_{self.combine}"
        if self.layout == "subgroup":
            return f"subgroup_{loads}_wg{self.workgroup}"
        combine = "" if self.combine == "none" else f"_{self.combine}"
        return f"pack_{loads}_g{self.g}_wg{self.workgroup}{combine}"

    @property
    def workgroup_storage(self) -> int:
        """Bytes of ``var<workgroup>``: one f32 per invocation for a tree, per subgroup for ``sg``."""
        if self.combine == "tree":
            return F32_BYTES * self.workgroup
        if self.combine == "sg" and self.layout != "subgroup":
            return F32_BYTES * (self.workgroup // MIN_SUBGROUP)
        return 0


# -- WGSL --------------------------------------------------------------------------------------


def _header(element: str | None, subgroups: bool, *, out: bool = True, scratch: bool = False) -> str:
    """The bindings of one stage, only those it uses: ``x`` as ``array<element>`` (None: the stage
    reads no x), ``out`` (``out``), the params, and the partials (``scratch``). A binding a stage
    declares but never uses would be missing from its layout "auto", and binding it would fail."""
    lines = [SUBGROUPS_DIRECTIVE if subgroups else ""]
    if element is not None:
        lines.append(f"@group(0) @binding(0) var<storage, read> x: array<{element}>;\n")
    if out:
        lines.append("@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n")
    lines.append("struct Params { rows: u32, cols: u32 }\n@group(0) @binding(2) var<uniform> p: Params;\n")
    if scratch:
        lines.append(f"@group(0) @binding(3) var<storage, read_write> {SCRATCH}: array<f32>;\n")
    return "".join(lines)


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


def _strides(count: int, stride: int | str) -> str:
    """``count`` strides in WGSL: a constant where ``stride`` is a number, else a product with the
    run-time value ``stride`` names (a subgroup's size)."""
    return f"{count * stride}u" if isinstance(stride, int) else stride if count == 1 else f"{count}u * {stride}"


def _strided_fold(op: Op, unroll: int, stride: int | str, bound: str, take: Callable[[str], str],
                  lines: list[str]) -> str:
    """Append to ``lines`` the loop that folds ``take(i)``, ``take(i + stride)``, ... below
    ``bound`` into the accumulators ``a0`` .. ``a{unroll-1}`` (``unroll`` independent loads a step,
    then one at a time), from the ``i`` already declared; answer the accumulators' fold. ``stride``
    is a number of elements, or the WGSL name of one known at run time."""
    if unroll > 1:
        lines.append(f"  for (; i + {_strides(unroll - 1, stride)} < {bound}; i += {_strides(unroll, stride)}) {{\n")
        for u in range(unroll):
            lines.append(f"    a{u} = {_combine(op, f'a{u}', take(f'i + {_strides(u, stride)}' if u else 'i'))};\n")
        lines.append("  }\n")
    lines.append(f"  for (; i < {bound}; i += {_strides(1, stride)}) {{ a0 = {_combine(op, 'a0', take('i'))}; }}\n")
    total = "a0"
    for u in range(1, unroll):
        total = _combine(op, total, f"a{u}")
    return total


def _accumulate(op: Op, width: int, unroll: int, start: str, count: str, thread: str, stride: int | str,
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
    total = _strided_fold(op, unroll, stride, count, lambda index: f"{source}[{start} + {index}]", lines)
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


def row_wgsl(op: Op, v: ReductionVariant) -> str:
    """Layout ``row``: workgroup ``g`` reduces row ``g`` into ``out[g]``."""
    element = "f32" if v.width == 1 else "vec4<f32>"
    count = "p.cols" if v.width == 1 else "(p.cols / 4u)"
    return (
        _header(element, v.subgroups)
        + _shared(v.combine, v.workgroup)
        + _signature(v.workgroup, v.subgroups)
        + "  let row = group;\n"
        "  if (row >= p.rows) { return; }\n"
        f"  let count = {count};\n"
        "  let start = row * count;\n"
        + _accumulate(op, v.width, v.unroll, "start", "count", "lid", v.workgroup)
        + _workgroup_combine(op, v.combine, v.workgroup, f"out[row] = {_finish(op, 'result')};")
        + "}\n"
    )


def split_wgsl(op: Op, v: ReductionVariant) -> str:
    """Stage 1: workgroup ``g`` reduces chunk ``g % chunks`` of row ``g / chunks`` into scratch[g]."""
    element = "f32" if v.width == 1 else "vec4<f32>"
    per_chunk = v.chunk // v.width
    count = "p.cols" if v.width == 1 else "(p.cols / 4u)"
    return (
        _header(element, v.subgroups, out=False, scratch=True)
        + _shared(v.combine, v.workgroup)
        + _signature(v.workgroup, v.subgroups)
        + f"  let chunks = (p.cols + {v.chunk - 1}u) / {v.chunk}u;\n"
        "  if (group >= p.rows * chunks) { return; }\n"
        "  let row = group / chunks;\n"
        "  let chunk = group % chunks;\n"
        f"  let count = {count};\n"
        f"  let begin = chunk * {per_chunk}u;\n"
        "  let start = row * count + begin;\n"
        f"  let length = min(count - begin, {per_chunk}u);\n"
        + _accumulate(op, v.width, v.unroll, "start", "length", "lid", v.workgroup)
        + _workgroup_combine(op, v.combine, v.workgroup, f"{SCRATCH}[group] = result;")
        + "}\n"
    )


def split_final_wgsl(op: Op, v: ReductionVariant) -> str:
    """Stage 2: workgroup ``row`` reduces the row's partials in scratch into ``out[row]``; after a
    masked stage 1 (``v.masked``) also the row's elements past the last whole vec4 of ``x``,
    which stage 1 cannot read (see :mod:`wgtune.kernels.reduction.masked`)."""
    store = f"out[row] = {_finish(op, 'result')};"
    if v.masked:
        merged = _combine(op, "total", "x[e]")
        store = (
            "var total = result;\n"
            "    for (var e = max(p.rows * p.cols / 4u * 4u, row * p.cols); e < row * p.cols + p.cols; e++) "
            f"{{ total = {merged}; }}\n"
            f"    out[row] = {_finish(op, 'total')};"
        )
    return (
        _header("f32" if v.masked else None, v.subgroups, scratch=True)
        + _shared(v.combine, v.workgroup)
        + _signature(v.workgroup, v.subgroups)
        + "  let row = group;\n"
        "  if (row >= p.rows) { return; }\n"
        f"  let chunks = (p.cols + {v.chunk - 1}u) / {v.chunk}u;\n"
        "  let start = row * chunks;\n"
        + _accumulate(op, 1, 1, "start", "chunks", "lid", v.workgroup, source=SCRATCH)
        + _workgroup_combine(op, v.combine, v.workgroup, store)
        + "}\n"
    )


def pack_wgsl(op: Op, v: ReductionVariant) -> str:
    """Layout ``pack``: ``g`` invocations per row; rows past the end still take part (barriers, shuffles), idle."""
    element = "f32" if v.width == 1 else "vec4<f32>"
    rows_per_group = v.workgroup // v.g
    count = "p.cols" if v.width == 1 else "(p.cols / 4u)"
    lines = [
        _header(element, v.subgroups),
        _shared(v.combine, v.workgroup),
        _signature(v.workgroup, v.subgroups),
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


def subgroup_wgsl(op: Op, v: ReductionVariant) -> str:
    """Layout ``subgroup``: each subgroup reduces a row with subgroup operations alone (no workgroup
    memory, no barrier), the rows dealt out round by round: the host sizes the grid for subgroups
    of 32 (``SUBGROUP_GRID``), and subgroups of any other size take more rounds or leave some idle.
    The rounds are as many for every invocation, so the subgroup operation runs in uniform control
    flow; a row past the end reads ``x[0]`` (never out of bounds: candidates run without runtime
    checks) and stores nothing."""
    element = "f32" if v.width == 1 else "vec4<f32>"
    count = "p.cols" if v.width == 1 else "(p.cols / 4u)"
    return (
        _header(element, True)
        + "\n"
        + _signature(v.workgroup, True)
        + f"  let per_group = max(1u, {v.workgroup}u / sg_size);\n"  # a subgroup wider than the workgroup: one
        "  let total = groups.x * groups.y * per_group;\n"
        "  let first = group * per_group + lid / sg_size;\n"
        f"  let count = {count};\n"
        "  let rounds = (p.rows + total - 1u) / total;\n"
        "  for (var r = 0u; r < rounds; r++) {\n"
        "  let row = first + r * total;\n"
        "  let length = select(0u, count, row < p.rows);\n"
        "  let start = select(0u, row * count, row < p.rows);\n"
        + _accumulate(op, v.width, v.unroll, "start", "length", "lane", "sg_size")
        + f"  let result = {op.subgroup}(acc);\n"
        f"  if (lane == 0u && row < p.rows) {{ out[row] = {_finish(op, 'result')}; }}\n"
        "  }\n}\n"
    )
