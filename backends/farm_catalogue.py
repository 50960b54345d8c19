"""A farm's catalogue: which (set, key) tunes a farm runs, from sizes of the registered families' sets.

A catalogue is a JSON document of sizes per set (``{"matmul": [[M, N, K], ...], "fma": [[N], ...]}``)
or the demo suite's sizes (:func:`default_catalogue`); :func:`plan_jobs` makes one
:class:`~wgtune.backends.farm_worker.FarmJob` per (set, key), a size whose key an earlier size of
its set has being the same tune. Sets are the registry's (``kernels/families.py``); a name it does
not have is a ConfigError naming those it has.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from wgtune.errors import ConfigError, StoreError
from wgtune.kernels.families import family_named, family_names
from wgtune.store.bounded_json import parse_json

from .farm_worker import FarmJob

__all__ = ["MAX_CATALOGUE_BYTES", "default_catalogue", "load_catalogue", "parse_catalogue", "plan_jobs"]

MAX_CATALOGUE_BYTES = 16 << 20
"""A catalogue file larger than this is refused unread: a million sizes is far past any farm."""


def plan_jobs(sizes: Iterable[tuple[str, tuple[int, ...]]]) -> list[FarmJob]:
    """One job per (set, key) of ``(set name, size)`` pairs, in their order: a size whose key an
    earlier size of its set has is the same tune, and is left out."""
    jobs, seen = [], set()
    for set_name, size in sizes:
        job = FarmJob.plan(set_name, size)
        if (set_name, job.key) not in seen:
            seen.add((set_name, job.key))
            jobs.append(job)
    return jobs


def default_catalogue(only: Iterable[str] | None = None) -> list[FarmJob]:
    """The demo suite's sizes (what ``wgtune tune`` tunes: each registered family's
    ``demo_sizes``), of the sets in ``only`` when given."""
    wanted = _known_sets(only)
    return plan_jobs((name, size) for name in wanted for size in family_named(name).demo_sizes)


def _known_sets(only: Iterable[str] | None) -> list[str]:
    """The set names of ``only`` (each once), or every registered one; a ConfigError naming the
    known sets for a name the registry does not have."""
    if only is None:
        return family_names()
    wanted = list(dict.fromkeys(only))
    unknown = [name for name in wanted if name not in family_names()]
    if unknown:
        raise ConfigError(f"unknown set(s) {', '.join(unknown)}; sets: {', '.join(family_names())}")
    return wanted


def parse_catalogue(
    document: object, source: str = "the catalogue", only: Iterable[str] | None = None
) -> list[FarmJob]:
    """The jobs of a catalogue document: a JSON object of set name -> list of sizes, each size a
    list of positive integers, one per dim of the set's family (``{"matmul": [[1024, 1024, 1024]],
    "fma": [[1048576]]}``; :meth:`~wgtune.kernels.family.Family.size`). A ConfigError names the
    first thing wrong (where, and what was expected; for an unknown set, the sets there are)."""
    if not isinstance(document, dict) or not document:
        raise ConfigError(f"{source}: expected a JSON object of set name -> list of sizes, "
                          f"like {{\"matmul\": [[1024, 1024, 1024]]}}; sets: {', '.join(family_names())}")
    wanted = _known_sets(only) if only is not None else None
    pairs = []
    for name, sizes in document.items():
        family = family_named(name, source)
        if not isinstance(sizes, list):
            raise ConfigError(f"{source}: {name}: expected a list of sizes, got {type(sizes).__name__}")
        for index, size in enumerate(sizes):
            checked = family.size(size, f"{source}: {name}[{index}]")
            if wanted is None or name in wanted:
                pairs.append((name, checked))
    if not pairs:
        raise ConfigError(f"{source}: no sizes to tune" + (" of the sets asked for" if only is not None else ""))
    return plan_jobs(pairs)


def load_catalogue(path: str | os.PathLike, only: Iterable[str] | None = None) -> list[FarmJob]:
    """The jobs of the catalogue file at ``path`` (see :func:`parse_catalogue`); a ConfigError
    for a file that is too large or not JSON, an OSError for one that cannot be read."""
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_CATALOGUE_BYTES:
        raise ConfigError(f"{path}: {size} bytes, more than a catalogue may have ({MAX_CATALOGUE_BYTES})")
    try:
        document = parse_json(path.read_bytes())
    except StoreError as error:
        raise ConfigError(f"{path}: {error}") from None
    return parse_catalogue(document, str(path), only)
