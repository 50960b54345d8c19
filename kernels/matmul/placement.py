"""Where a workgroup of a tiled matmul candidate works: the block of C it computes (``row0``,
``col0``) and the range of K it sums (``k_begin``, ``k_end``), as WGSL lines at the top of
``main`` (``wid`` its workgroup id, ``groups`` the grid, ``p`` the params).

- by default block ``(wid.y, wid.x)``, all of K;
- ``swizzle``: the same blocks in another order, groups of block rows walked column by column;
- ``kgrid``: K cut into ``groups.z`` chunks of whole K steps, chunk ``wid.z`` (with ``partials``
  the chunk's scratch offset too);
- ``tail``: one run of workgroups, the blocks that fill whole waves first, all of K each, then
  the last wave's blocks in ``groups.z`` chunks each (``cut`` says which; its grid is
  :meth:`~wgtune.kernels.matmul.tile.MatmulTile.grid`).

The vector layout (:mod:`wgtune.kernels.matmul.vector`) puts these lines first.
"""

from __future__ import annotations

from .partials import partials_base
from .tile import MatmulTile

__all__ = ["placement"]


def placement(tile: MatmulTile) -> str:
    """The lines that set ``row0``, ``col0``, ``k_begin`` and ``k_end`` for ``tile``; a
    workgroup with nothing to sum returns (uniformly: every value comes from ``wid``)."""
    if tile.tail:
        return _tail(tile)
    return _k_range(tile) + _block(tile)


def _block(tile: MatmulTile) -> str:
    if not tile.swizzle:
        return f"  let row0 = wid.y * {tile.bm}u;\n  let col0 = wid.x * {tile.bn}u;\n"
    # Workgroups in launch order walk down groups of `swizzle` block rows, column by column, so
    # that neighbours in time share rows of A and columns of B in the cache.
    return (
        "  let wg_linear = wid.y * groups.x + wid.x;\n"
        f"  let wg_span = {tile.swizzle}u * groups.x;\n"
        f"  let wg_first = (wg_linear / wg_span) * {tile.swizzle}u;\n"
        f"  let wg_rows = min(groups.y - wg_first, {tile.swizzle}u);\n"
        "  let wg_within = wg_linear % wg_span;\n"
        f"  let row0 = (wg_first + wg_within % wg_rows) * {tile.bm}u;\n"
        f"  let col0 = (wg_within / wg_rows) * {tile.bn}u;\n"
    )


def _chunk(tile: MatmulTile) -> str:
    """``k_chunk``: K over ``groups.z`` chunks, rounded up to whole K steps."""
    step = tile.k_step
    return f"  let k_chunk = ((p.k + {step - 1}u) / {step}u + groups.z - 1u) / groups.z * {step}u;\n"


def _k_range(tile: MatmulTile) -> str:
    if not tile.kgrid:
        return "  let k_begin = 0u;\n  let k_end = p.k;\n"
    if tile.partials:  # an empty chunk still writes its (zero) partial sums: the reduce reads them all
        return (partials_base() + _chunk(tile)
                + "  let k_begin = wid.z * k_chunk;\n  let k_end = min(p.k, k_begin + k_chunk);\n")
    return (
        "  // chunk wid.z of groups.z, in whole K steps; a workgroup past the last K step adds nothing\n"
        + _chunk(tile)
        + "  let k_begin = wid.z * k_chunk;\n"
        "  let k_end = min(p.k, k_begin + k_chunk);\n"
        "  if (k_begin >= k_end) { return; }  // uniform across the workgroup\n"
    )


def _tail(tile: MatmulTile) -> str:
    """Workgroup ``w`` of the run takes block ``w`` whole while ``w`` is within the blocks that
    fill whole waves of ``tail`` (``p.wave``: the stage's own params carry it), and chunks of the
    last wave's blocks after them, ``groups.z`` a block (one chunk: every block whole)."""
    return (
        f"  let cols = (p.n + {tile.bn - 1}u) / {tile.bn}u;\n"
        f"  let blocks = cols * ((p.m + {tile.bm - 1}u) / {tile.bm}u);\n"
        "  let whole = select(blocks, blocks - blocks % p.wave, groups.z > 1u);\n"
        "  let w = (wid.z * groups.y + wid.y) * groups.x + wid.x;\n"
        "  if (w >= whole + (blocks - whole) * groups.z) { return; }  // past the run: uniform\n"
        + _chunk(tile)
        + "  let cut = w >= whole;\n"
        "  let block = select(w, whole + (w - whole) / groups.z, cut);\n"
        "  let k_begin = select(0u, (w - whole) % groups.z * k_chunk, cut);\n"
        "  let k_end = select(p.k, min(p.k, k_begin + k_chunk), cut);\n"
        "  if (k_begin >= k_end) { return; }  // uniform across the workgroup\n"
        f"  let row0 = block / cols * {tile.bm}u;\n  let col0 = block % cols * {tile.bn}u;\n"
    )
