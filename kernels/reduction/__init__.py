"""Row reductions: ``out[r] = sum(x[r, :])`` or ``max(x[r, :])`` of a row-major f32 ``x[rows, cols]``.

Call convention (see :class:`wgtune.Args`): buffers ``(x, out)`` at bindings 0, 1, then the
params ``(rows, cols)`` as a uniform at binding 2. ``out`` holds ``rows`` f32, the set's one
output (buffer 1 of the call). The two-pass candidates' partial results are theirs: each
declares ``scratch`` (``Kernel(scratch=...)``, :data:`SCRATCH`, at binding 3) of
:func:`scratch_elements` ``(rows, cols, chunk)`` f32, which the device makes per call and keeps
with its bind groups; the caller gives no buffer for it. (A call in order that still gives a
third buffer, as this family once asked, binds as before: no candidate declares a third buffer
of the call, so it is left alone.) :func:`make_reduction_args` builds a call with seeded inputs
(:mod:`.references`, with the exact outputs).
One set per operation: ``reduction_set("sum")`` is the set ``"row_sum"``,
``reduction_set("max")`` the set ``"row_max"``.

Candidates differ in how a row is spread over invocations, and in how their partial results
are combined:

- ``row_*`` (group ``one_pass``): one workgroup per row. Its invocations stride over the row,
  each keeping ``unroll`` independent accumulators of f32 or vec4 loads, then combine: either a
  tree in workgroup memory (``tree``) or ``subgroupAdd`` / ``subgroupMax`` followed by a small
  workgroup-memory step over one value per subgroup (``sg``).
- ``split_*`` (group ``two_pass``): for a few long rows. Stage 1 runs several workgroups per
  row, each reducing a chunk of ``chunk`` elements into ``scratch`` (the candidate's own, see
  above); stage 2 (the candidate's ``then``) runs one workgroup per row over that row's partials
  and writes ``out``.
- ``pack_*`` (group ``multi_row``): for many short rows. A workgroup handles ``workgroup / g``
  rows, ``g`` invocations a row: ``g = 1`` sums a row in one invocation; larger ``g`` combine in
  workgroup memory (``tree``) or, for ``g = 4``, with ``subgroupShuffleXor`` (``shuffle``).
- ``subgroup_*`` (group ``one_pass`` too): a subgroup per row, whatever the device's subgroup
  size: its invocations stride over the row and combine with ``subgroupAdd`` / ``subgroupMax``
  alone, no workgroup memory and no barrier. The grid is sized for subgroups of
  :data:`SUBGROUP_GRID` and the rows dealt out round by round, so subgroups of another size take
  more rounds or leave some idle (rows of about a thousand: on an H100 they brought row_sum at
  1-4M elements from 1.42-1.71x torch's CUDA graph to 1.26-1.49x,
  ``bench/results/h100-short-reductions-subgroup-session33.txt``).

Loads are f32, vec4 (``vec4``: ``x`` bound as ``array<vec4<f32>>``, so ``cols % 4 == 0`` is
needed, every row then starting on a vec4) or masked vec4 (``vec4m``: any ``cols``; the aligned
vec4 over each row, the lanes outside it masked, and the last elements of ``x`` past its last
whole vec4 read as f32 by the candidate's last stage: :mod:`wgtune.kernels.reduction.masked`).
The key records what vec4 loads can do (``"vec"``: 4 where ``cols % 4 == 0``, 1 where not but
``x`` holds a whole vec4, 0 where it does not): the plan skips vec4 candidates on keys other
than 4, and masked ones on keys other than 1 (where plain vec4 serve, with the same loads
unmasked). A plain vec4 candidate given an odd ``cols`` would read misaligned windows and drop
the rows' tails; for ``max`` that can even pass a check on random data by luck, so it is never
planned there. Workgroups are laid out on a 2-D grid, row-major over ``num_workgroups.x``,
because WebGPU allows at most 65535 workgroups per dimension.

On an NVIDIA H200 (Vulkan), ``bench/kernel_probe.py --full`` puts the best candidate of each
key's first batch at a median of 130% of ``torch.sum`` over 24 shapes (``torch.amax``: 137% over
8): odd row lengths 87-262% (3000x3001 87%, 97% in another run: torch's figure varies there), few
long rows of odd length 102-127% (masked vec4 in two passes, 4x10000019 103%, 2x100000007 102%;
f32 loads got 92-94% there), many short rows 110-608% (10000x1000 110%, 1000000x7 392%,
262144x33 587% with masked vec4), squares 111-321%.

Subgroups. The ``sg`` and ``shuffle`` candidates need the ``"subgroups"`` device feature (where
it is missing they are refused by name, and the others run); what they assume of subgroups is
in :mod:`wgtune.kernels.reduction.wgsl`, which generates every candidate's WGSL.

Numerics. Candidates add in different orders, so sums differ by rounding; the ``row_sum`` set's
tolerance is :data:`SUM_RTOL` relative plus :data:`SUM_ATOL` absolute (see there). ``max`` is
exact: every candidate returns an element of the row, so ``row_max`` compares exactly. A row of
negative numbers, or of ``-inf``, has its true maximum (accumulators start from an element of
the row, or, masked, from a ``-inf`` made at run time); an empty row (``cols == 0``) sums to 0
and has maximum ``-inf``. NaN: sums propagate it (IEEE addition does), ``max`` does not promise to (WGSL's
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

from collections.abc import Callable, Sequence

from wgtune import Args, Group, Kernel, TunableSet, anchor
from wgtune.key import Key

from ..common import F32_BYTES, ceil_div, with_runtime_checks, wrapped_grid
from ..family import Family
from .masked import masked_pack_wgsl, masked_row_wgsl, masked_split_wgsl, tail_wgsl
from .references import (
    make_reduction_args,
    make_row_max_args,
    make_row_sum_args,
    row_max_check,
    row_max_reference,
    row_sum_check,
    row_sum_reference,
)
from .wgsl import (
    MIN_CHUNK,
    OPS,
    SCRATCH,
    ReductionVariant,
    pack_wgsl,
    reduction_op,
    row_wgsl,
    split_final_wgsl,
    split_wgsl,
    subgroup_wgsl,
)

__all__ = [
    "GROUPS",
    "MIN_CHUNK",
    "OPS",
    "REDUCTION_VARIANTS",
    "ROW_MAX_FAMILY",
    "ROW_SUM_FAMILY",
    "SCRATCH",
    "SUM_ATOL",
    "SUM_RTOL",
    "ReductionVariant",
    "make_reduction_args",
    "make_row_max_args",
    "make_row_sum_args",
    "reduction_kernel",
    "reduction_key",
    "reduction_set",
    "row_max_reference",
    "row_sum_reference",
    "scratch_elements",
]

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
# Packs of at least this many invocations a row are screened first on rows past MULTI_ROW_MAX_COLS.
WIDE_PACK = 16
# The subgroup size a ``subgroup`` candidate's grid is sized for (NVIDIA's and Apple's; AMD's 64
# takes two rounds, Intel's 8-16 leaves subgroups idle): its rows a workgroup are workgroup / this.
SUBGROUP_GRID = 32

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


# Candidate 0 is the plainest safe one: f32 loads, a workgroup of 256 per row (WebGPU's default
# limit), a tree in workgroup memory. Four loads a step, so that on lavapipe its invocations
# loop at most 65535 times (see above) on any row it can bind (2**25 f32): it stays right there.
REDUCTION_VARIANTS: tuple[ReductionVariant, ...] = (
    ReductionVariant("row", 256, unroll=4),
    # one pass, tree
    ReductionVariant("row", 128),
    ReductionVariant("row", 256),
    ReductionVariant("row", 128, unroll=4),  # odd rows: 1000x4097 194%, 4096x1023 207%, 3000x3001 97%
    ReductionVariant("row", 128, width=4),
    ReductionVariant("row", 256, width=4),
    ReductionVariant("row", 128, width=4, unroll=2),
    ReductionVariant("row", 256, width=4, unroll=2),
    ReductionVariant("row", 128, width=4, masked=True),  # 4096x1023 182%
    # one pass, subgroups
    ReductionVariant("row", 256, combine="sg"),
    ReductionVariant("row", 256, unroll=4, combine="sg"),
    ReductionVariant("row", 128, width=4, combine="sg"),
    ReductionVariant("row", 256, width=4, combine="sg"),
    ReductionVariant("row", 256, width=4, unroll=2, combine="sg"),
    ReductionVariant("row", 256, width=4, unroll=2, combine="sg", masked=True),  # 3000x3001 97%
    # two passes
    ReductionVariant("split", 256, chunk=4096),  # 3x1000003 212%
    ReductionVariant("split", 256, unroll=4, chunk=16384),  # 3x1000003 216%
    ReductionVariant("split", 64, width=4, chunk=4096),
    ReductionVariant("split", 256, width=4, chunk=16384),
    ReductionVariant("split", 256, width=4, unroll=2, chunk=65536),
    ReductionVariant("split", 256, chunk=8192, combine="sg"),
    ReductionVariant("split", 256, width=4, chunk=16384, combine="sg"),
    ReductionVariant("split", 256, width=4, unroll=2, chunk=65536, combine="sg"),
    ReductionVariant("split", 256, width=4, chunk=16384, masked=True),  # 16x1000001 104%
    ReductionVariant("split", 256, width=4, unroll=2, chunk=65536, masked=True),  # 4x10000019 102%
    ReductionVariant("split", 256, width=4, unroll=2, chunk=65536, combine="sg", masked=True),
    # several rows per workgroup
    ReductionVariant("pack", 256, g=1, combine="none"),
    ReductionVariant("pack", 256, unroll=4, g=1, combine="none"),
    ReductionVariant("pack", 64, width=4, g=1, combine="none"),
    ReductionVariant("pack", 256, g=4),
    ReductionVariant("pack", 256, g=8),
    ReductionVariant("pack", 256, g=16),
    ReductionVariant("pack", 256, g=32),
    ReductionVariant("pack", 256, width=4, g=4),
    ReductionVariant("pack", 256, g=4, combine="shuffle"),
    ReductionVariant("pack", 256, width=4, g=4, combine="shuffle"),
    ReductionVariant("pack", 64, width=4, g=1, combine="none", masked=True),
    ReductionVariant("pack", 256, width=4, g=1, combine="none", masked=True),
    ReductionVariant("pack", 256, width=4, g=4, masked=True),
    ReductionVariant("pack", 256, width=4, g=4, combine="shuffle", masked=True),
    # A subgroup a row (issue 29: rows of a thousand or so, where the best one-pass candidate ran at
    # 1.4-1.7x torch's CUDA graph on an H100), last so that the others keep their indices.
    ReductionVariant("subgroup", 256, width=4, combine="sg"),
    ReductionVariant("subgroup", 256, width=4, unroll=2, combine="sg"),
    ReductionVariant("subgroup", 128, width=4, unroll=4, combine="sg"),
    ReductionVariant("subgroup", 256, unroll=4, combine="sg"),
)


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


ONE_PASS = Group("one_pass", ONE_PASS_PRIORITY)
GROUPS: dict[str, Group] = {
    "row": ONE_PASS,
    "subgroup": ONE_PASS,  # a subgroup a row, beside a workgroup a row
    "split": Group("two_pass", _two_pass_priority),
    "pack": Group("multi_row", _multi_row_priority),
}


def _vec4_priority(key: Key) -> int:
    """Skip (-1) a plain vec4 candidate on keys whose cols it cannot cover."""
    return 0 if dict(key).get("vec", 1) == 4 else -1


def _masked_priority(key: Key) -> int:
    """A masked vec4 candidate serves any cols but needs a whole vec4 in ``x``; where plain vec4
    ones can serve (the same loads, no masking), it is skipped."""
    return 0 if dict(key).get("vec", 1) == 1 else -1


def _wide_pack_priority(key: Key) -> int:
    """First in their group (so its probes) on rows of hundreds to a few thousand columns: there
    packs of 16 or 32 invocations a row were the best by 20-43% over the one_pass pick (H200,
    compiled without runtime checks: the regret of the tune that pruned them), while the group's
    other candidates, of one or four invocations a row, are over twice the leader's time and
    pruned it."""
    _, cols = _dims(key)
    return 1 if MULTI_ROW_MAX_COLS < cols <= MULTI_ROW_SKIP_COLS else 0


def _tail_grid(args: Args) -> tuple[int, int, int]:
    """One invocation where ``x`` has a tail past its last whole vec4, none otherwise."""
    rows, cols = args.params[:2]
    return (1 if rows * cols % 4 else 0, 1, 1)


def reduction_kernel(op: str, variant: ReductionVariant, *, group: Group | None = None) -> Kernel:
    """The candidate for ``variant`` of ``op`` (``"sum"`` or ``"max"``), in ``group``."""
    spec = reduction_op(op)
    features = ("subgroups",) if variant.subgroups else ()
    size = (variant.workgroup, 1, 1)
    priority = (_masked_priority if variant.masked else _vec4_priority if variant.width == 4
                else _wide_pack_priority if variant.layout == "pack" and variant.g >= WIDE_PACK else 0)
    # A masked row or pack candidate ends with the stage that reads the tail of x.
    tail = (Kernel(variant.name + "_tail", tail_wgsl(spec), grid=_tail_grid, workgroup_size=(1, 1, 1),
                   workgroup_storage=0),) if variant.masked else ()
    if variant.layout == "row":
        return Kernel(
            variant.name, (masked_row_wgsl if variant.masked else row_wgsl)(spec, variant),
            grid=lambda args: wrapped_grid(args.params[0]),
            workgroup_size=size, workgroup_storage=variant.workgroup_storage, priority=priority, group=group,
            features=features, then=tail,
        )
    if variant.layout == "subgroup":
        rows_per_group = max(1, variant.workgroup // SUBGROUP_GRID)
        return Kernel(
            variant.name, subgroup_wgsl(spec, variant),
            grid=lambda args: wrapped_grid(ceil_div(args.params[0], rows_per_group)),
            workgroup_size=size, workgroup_storage=0, priority=priority, group=group, features=features,
        )
    if variant.layout == "pack":
        rows_per_group = variant.workgroup // variant.g
        return Kernel(
            variant.name, (masked_pack_wgsl if variant.masked else pack_wgsl)(spec, variant),
            grid=lambda args: wrapped_grid(ceil_div(args.params[0], rows_per_group)),
            workgroup_size=size, workgroup_storage=variant.workgroup_storage, priority=priority, group=group,
            features=features, then=tail,
        )
    chunk = variant.chunk

    def partials_bytes(args: Args) -> int:
        rows, cols = args.params[:2]
        return F32_BYTES * scratch_elements(rows, cols, chunk)

    final = Kernel(
        variant.name + "_final", split_final_wgsl(spec, variant),
        grid=lambda args: wrapped_grid(args.params[0]), workgroup_size=size,
        workgroup_storage=variant.workgroup_storage, features=features,
    )
    return Kernel(
        variant.name, (masked_split_wgsl if variant.masked else split_wgsl)(spec, variant),
        grid=lambda args: wrapped_grid(args.params[0] * ceil_div(args.params[1], chunk)),
        workgroup_size=size, workgroup_storage=variant.workgroup_storage, priority=priority, group=group,
        features=features, then=(final,), scratch={SCRATCH: partials_bytes},
    )


def scratch_elements(rows: int, cols: int, chunk: int = MIN_CHUNK) -> int:
    """The f32 partials a two-pass candidate of ``chunk`` elements a workgroup writes for
    ``rows x cols``: one per chunk of each row, and at least 1 (a storage binding of
    ``array<f32>`` holds at least one). With the default chunk, the smallest any two-pass
    candidate has (:data:`MIN_CHUNK`), the most any of them writes."""
    return max(1, rows * ceil_div(cols, chunk))


def reduction_key(op: str) -> Callable[[Args], dict[str, object]]:
    """The key function of ``op``'s set: rows and cols anchored to powers of two, the op, and
    ``vec``, what vec4 loads can do there: 4 where ``cols % 4 == 0`` (every row starts on a vec4:
    plain vec4 candidates serve the call), 1 where the rows do not but ``x`` holds a whole vec4
    (masked vec4 candidates serve it), 0 where ``x`` has fewer than 4 elements (no vec4 binding
    fits: only f32 loads)."""
    reduction_op(op)

    def key(args: Args) -> dict[str, object]:
        rows, cols = args.params[:2]
        vec = 4 if cols % 4 == 0 else 1 if rows * cols >= 4 else 0
        return {"rows": anchor(rows), "cols": anchor(cols), "op": op, "vec": vec, "dtype": "f32"}

    return key


def reduction_set(op: str, variants: Sequence[ReductionVariant] = REDUCTION_VARIANTS) -> TunableSet:
    """The set ``row_{op}``: candidate 0 (``variants[0]``, no group) first, then the others in
    their layout's group; each compiled without runtime checks where the device can (on an H200
    the best candidate of a shape ran up to 45% faster so, 0-3% on most; none lost beyond noise)."""
    spec = reduction_op(op)
    candidates = [
        with_runtime_checks(reduction_kernel(op, variant, group=None if index == 0 else GROUPS[variant.layout]), False)
        for index, variant in enumerate(variants)
    ]
    exact = spec.zero is None  # max returns an element of the row: every candidate agrees exactly
    # The output by index, as every family gives it (bench/ reads it as one): ``out``, buffer 1 of
    # the call. The two-pass candidates' partials are their scratch, never an output.
    return TunableSet(
        f"row_{op}", candidates, key=reduction_key(op), outputs=(1,),
        atol=0.0 if exact else SUM_ATOL, rtol=0.0 if exact else SUM_RTOL,
    )


# -- the families ----------------------------------------------------------------------------------


ROW_SUM_FAMILY = Family(
    name="row_sum",
    build=lambda: reduction_set("sum"),
    dims=("rows", "cols"),
    make_args=make_row_sum_args,
    reference=row_sum_check,
    demo_sizes=((512, 1024), (3, 20_001)),  # many short rows; a few long odd ones (two-pass, masked vec4)
)
"""The ``row_sum`` set in the registry (:mod:`wgtune.kernels.families`)."""

ROW_MAX_FAMILY = Family(
    name="row_max",
    build=lambda: reduction_set("max"),
    dims=("rows", "cols"),
    make_args=make_row_max_args,
    reference=row_max_check,
    demo_sizes=((512, 1024),),
)
"""The ``row_max`` set in the registry (:mod:`wgtune.kernels.families`)."""
