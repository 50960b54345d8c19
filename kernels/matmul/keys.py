"""The matmul sets' keys, and the plan they make: which groups of candidates a key measures, in what order.

The key holds M, N, K anchored to powers of two, the dtype, and what vec4 loads need: ``vec_k``
4 where K is a multiple of 4 (rows of A start on a vec4), ``vec_n`` 4 where N is (rows of B and
C do), else 1. :func:`size_class` puts a key in a class, and :func:`groups_for` gives the groups
its batches come from, in order (``kernels/matmul/__init__.py``'s module doc says why each). The rules
here are the candidates' priorities: a vec4 candidate is skipped where the key does not allow
its loads, a flat twin waits in a later batch where its vec4 twin can serve, a split-K tile with
a narrow side comes first in its group where that side fits the key's, a group a key's
class does not list is skipped; the flat group (:mod:`wgtune.kernels.matmul.flat`) comes first on
medium and large keys with K at most FLAT_MAX_K, second (after the class's first group) on those
with K at most FLAT_LATE_MAX_K, and is skipped on every other key.
"""

from __future__ import annotations

from collections.abc import Callable

from wgtune import Args, Group, anchor
from wgtune.key import Key

from .chunks import MIN_K_CHUNK
from .tile import MatmulTile
from .tiles import COLS, DEEP, FLAT, GROUP_NAMES, LARGE, MEDIUM, ROWS, SMALL

__all__ = [
    "DEEP_MIN_K",
    "FLAT_LATE_MAX_K",
    "FLAT_MAX_K",
    "NARROW_BLOCK",
    "PLAN_GROUPS",
    "SKINNY_MAX",
    "SPLIT_MIN_K",
    "copy_priority",
    "groups_for",
    "long_k_only",
    "matmul_f16_key",
    "matmul_key",
    "matmul_sizes",
    "narrow_fit",
    "needs_vec4",
    "size_class",
    "tile_priority",
]

# Each class's groups in the order their batches come; a group a class does not list is skipped
# on its keys (tiles of 256x128 on a 64x64 output, say), and so are the skinny kernels on keys
# with more than SKINNY_MAX rows (ROWS) or columns (COLS), where each workgroup would read the
# whole of the other operand for a sliver of the output. Small keys start with the kernels of a
# few rows (on an H200 they beat the small tiles on every small shape probed but 32^3, by up to
# 1.8x at 256^3); large keys whose K or N is no multiple of 4 start with the medium tiles (their
# flat forms reached 84-96% of torch at 2047x2049x2051 and 3001x2999x1001, the large ones 69-75%).
_ORDER = {
    ROWS: (ROWS, DEEP, SMALL, MEDIUM, COLS),
    COLS: (COLS, DEEP, SMALL, MEDIUM, ROWS),
    DEEP: (DEEP, ROWS, COLS, MEDIUM, SMALL, LARGE),
    SMALL: (ROWS, SMALL, COLS, MEDIUM, DEEP),
    MEDIUM: (MEDIUM, LARGE, SMALL, DEEP),
    LARGE: (LARGE, MEDIUM, SMALL),
}
_UNALIGNED_LARGE = (MEDIUM, LARGE, SMALL)
SKINNY_MAX = 256
# The deep group splits K (over workgroups in chunks of at least MIN_K_CHUNK, or within one in
# slices): under two chunks' worth there is nothing to split. None of the H200 suite's shapes with
# K under 512 had a deep winner, and on SwiftShader its split tiles are the dearest compiles (a
# 128x128 kgrid tile took 7 s), which the page's small demo keys paid for nothing.
DEEP_MIN_K = 2 * MIN_K_CHUNK
# The shortest K (as keyed) on which skinny kernels that split K over workgroups are planned:
# shorter, they make a few chunks at most, and on small keys they would be the rows group's
# first probes and lose (that group leads there).
SPLIT_MIN_K = 4096
# The longest K (as keyed: a power of two) on which the flat kernels are planned, first, on keys of
# many outputs (the medium and large classes): there a product is a few dozen multiply-adds an
# output and is bound by writing C, which the tiles, built for a long K, waste (43-78% of torch on
# an H200 at K from 6 to 37). Small keys keep the rows group first (a launch costs more than
# their work), and skinny ones their skinny kernels.
FLAT_MAX_K = 64
# Up to this K (as keyed) the flat kernels are still planned on those keys, after the class's first
# group: at K 65 to 80 they won (H200, 2026-12-03, bench/results/h200-probe-short-k{,-2}.txt:
# 5490x854x65 84% against the tiles' 71%, 1129x1066x75 105-121% against 98-115%), at K 88 to 113
# the tiles did (by 5-15%), and the key cannot tell them apart (both key as 128).
FLAT_LATE_MAX_K = 128
# Blocks of up to this many rows (or columns) are narrow: made for keys whose M (or N) is a few dozen
# (:func:`narrow_fit`).
NARROW_BLOCK = 40
# Keys of at most this many outputs (as keyed) take the sliced tiles first in their group
# (:func:`sliced_fit`): 256 blocks of 64x64, about two of an H200's waves.
FEW_OUTPUTS = 1 << 20


def matmul_sizes(args: Args) -> tuple[int, int, int]:
    """The call's (M, N, K): its first three params."""
    m, n, k = args.params[:3]
    return m, n, k


def matmul_key(args: Args, dtype: str = "f32") -> dict[str, object]:
    """Sizes bucketed to powers of two, the dtype, and what vec4 access allows: ``vec_k`` 4 where
    K is a multiple of 4 (rows of A start on a vec4), ``vec_n`` 4 where N is (rows of B and C
    do), else 1."""
    m, n, k = matmul_sizes(args)
    return {"m": anchor(m), "n": anchor(n), "k": anchor(k), "dtype": dtype,
            "vec_k": 4 if k % 4 == 0 else 1, "vec_n": 4 if n % 4 == 0 else 1}


def matmul_f16_key(args: Args) -> dict[str, object]:
    """:func:`matmul_key` of the f16 set."""
    return matmul_key(args, "f16")


def size_class(key: Key) -> str:
    """The class of a key, which decides the order of the groups its batches come from
    (:func:`groups_for`, the module doc)."""
    fields = dict(key)
    m, n, k = fields["m"], fields["n"], fields["k"]
    if m <= 16 or n <= 16:
        return ROWS if m <= n else COLS
    if m * n <= 512 * 512 and k >= 1024:
        return DEEP
    if m * n <= 256 * 256:
        return SMALL
    if m * n >= 2048 * 2048 and min(m, n) >= 512:
        return LARGE
    return MEDIUM


def groups_for(key: Key) -> tuple[str, ...]:
    """The groups a key's plan takes its batches from, in order (the module doc): its class's
    order (the medium tiles first on a large key that vec4 loads cannot serve), less the skinny
    kernels' groups where M (``rows``) or N (``cols``) is past SKINNY_MAX, and the deep group
    where K is under DEEP_MIN_K; the flat group before them all on a medium or large key whose K
    is at most FLAT_MAX_K, after the first of them where it is at most FLAT_LATE_MAX_K (other keys
    plan none of it)."""
    fields = dict(key)
    too_many = {ROWS: fields["m"] > SKINNY_MAX, COLS: fields["n"] > SKINNY_MAX, DEEP: fields["k"] < DEEP_MIN_K}
    kind = size_class(key)
    order = _UNALIGNED_LARGE if kind == LARGE and not _aligned(key, True, True) else _ORDER[kind]
    groups = tuple(name for name in order if not too_many.get(name, False))
    if kind not in (MEDIUM, LARGE) or fields["k"] > FLAT_LATE_MAX_K:
        return groups
    return (FLAT, *groups) if fields["k"] <= FLAT_MAX_K else (groups[0], FLAT, *groups[1:])


def _group_priority(name: str) -> Callable[[Key], int]:
    def priority(key: Key) -> int:
        order = groups_for(key)
        return len(order) - order.index(name) if name in order else -1

    return priority


PLAN_GROUPS = {name: Group(name, _group_priority(name)) for name in GROUP_NAMES}


def _aligned(key: Key, k: bool, n: bool) -> bool:
    """Whether the key allows vec4 rows of A (``k``: K a multiple of 4) and of B and C (``n``)."""
    fields = dict(key)
    return (not k or fields.get("vec_k", 1) == 4) and (not n or fields.get("vec_n", 1) == 4)


def needs_vec4(k: bool, n: bool) -> Callable[[Key], int]:
    """A candidate with vec4 loads of A (``k``) or of B and C (``n``): first where the key
    allows them, skipped (it could not serve the call) elsewhere."""
    return lambda key: 1 if _aligned(key, k, n) else -1


def long_k_only(priority: int | Callable[[Key], int]) -> Callable[[Key], int]:
    """``priority`` where the key's K is at least SPLIT_MIN_K, skipped elsewhere."""

    def rule(key: Key) -> int:
        if dict(key)["k"] < SPLIT_MIN_K:
            return -1
        return priority(key) if callable(priority) else priority

    return rule


def _flat_twin(key: Key) -> int:
    """A flat tile: a reserve (after the first batch) where its vec4 twin can serve the key,
    first elsewhere."""
    return 0 if _aligned(key, True, True) else 1


def copy_priority(copy: str) -> Callable[[Key], int]:
    """A vec4 tile on copies of A (``copy`` holds ``a``) or of B (``b``): first on keys whose K
    (A) or N (B) is no multiple of 4 while the other is, as ``copy`` says, skipped elsewhere (where
    the call's own buffers serve vec4 loads, or where another form copies what is needed)."""
    return lambda key: 1 if (not _aligned(key, True, False), not _aligned(key, False, True)) == (
        "a" in copy, "b" in copy) else -1


def tile_priority(tile: MatmulTile) -> int | Callable[[Key], int]:
    """vec4 tiles: first where the key allows vec4, skipped elsewhere; their flat twins: a
    reserve where vec4 is allowed, first elsewhere; tiles of the scalar layout: always first;
    vec4 tiles on copies: first where the key's misalignment is what they copy. Split-K tiles
    with a narrow side come before the rest of their group where that side fits the key's
    (:func:`narrow_fit`), and tiles of several slices (not split-K) where the key has few outputs
    (:func:`sliced_fit`)."""
    if tile.copy:
        return copy_priority(tile.copy)
    if tile.vec4:
        priority: int | Callable[[Key], int] = needs_vec4(k=True, n=True)
    else:
        priority = _flat_twin if tile.vector else 1
    if tile.slices > 1 and not tile.kgrid:
        return _sliced_first(priority, tile.slices)
    if not tile.kgrid or min(tile.bm, tile.bn) > NARROW_BLOCK:
        return priority
    return _fitted(priority, tile.bm, tile.bn)


def sliced_fit(key: Key, slices: int) -> int:
    """How much earlier a tile of ``slices`` sets of invocations a block comes on ``key``: by
    ``slices // 2`` on keys of at most FEW_OUTPUTS outputs, else not at all.

    Such tiles exist for grids of fewer blocks than a GPU has cores, and their groups open with
    large blocks: the adaptive policy drops a group whose first two candidates take over twice the
    leader's time, and on 875x237x835 the medium group's 64x128 and 128x64 tiles did, so its 64x32
    tile of four slices, 26% ahead of the pick, was never measured (2026-12-06, H100, in both
    tunes of two wheels, bench/results/h100-ab-ownbuffers-draw3.txt)."""
    fields = dict(key)
    return slices // 2 if fields["m"] * fields["n"] <= FEW_OUTPUTS else 0


def _sliced_first(priority: int | Callable[[Key], int], slices: int) -> Callable[[Key], int]:
    def rule(key: Key) -> int:
        within = priority(key) if callable(priority) else priority
        return within if within < 0 else within + sliced_fit(key, slices)

    return rule


def narrow_fit(side: int, block: int) -> int:
    """How much earlier a split-K tile whose block is ``block`` rows (or columns) comes on a key
    whose M (or N) is ``side`` (a power of two): 4 where the block holds the side with less than
    half of it idle, 2 where it holds it with more idle, else 0.

    The adaptive policy drops a group whose first two candidates take over twice the leader's
    time, and the deep group's first were 64- and 128-row blocks, which at M of 9-16 leave most
    rows idle: so the 16-row block, the group's best there, was never measured (2026-12-05, H100,
    bench/results/h100-ab-rows8-in-set.txt: 16x10000x2000 picked a rows kernel 22-31% slower, in
    two tunes and the duels)."""
    if block > NARROW_BLOCK or block < side:
        return 0
    return 4 if block < 2 * side else 2


def _fitted(priority: int | Callable[[Key], int], bm: int, bn: int) -> Callable[[Key], int]:
    def rule(key: Key) -> int:
        within = priority(key) if callable(priority) else priority
        if within < 0:
            return within
        fields = dict(key)
        return within + max(narrow_fit(fields["m"], bm), narrow_fit(fields["n"], bn))

    return rule
