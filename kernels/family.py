"""A kernel family as one record: what the demo, the farm, the collector and the benches know of it.

A family module declares its :class:`Family` value(s) beside its set; the registry
(:mod:`wgtune.kernels.families`) lists them, and everything that enumerates families reads it:

- the demo suite (:func:`wgtune.kernels.demo.demo_suite`): each family with ``demo_sizes``, on those sizes;
- the tuning farm (``backends/farm.py``, ``backends/farm_worker.py``): a catalogue names a family
  by its set name, each size a list of its ``dims`` (:meth:`Family.size`), whose key is planned
  from ``params(size)`` alone (:meth:`Family.key_args`) and whose call a worker makes with ``make_args``;
- the fleet collector (``backends/collector.py``): the reports it accepts are of the registry's sets;
- ``bench/kernels.py``: a workload per family, checked against ``reference``.

Adding a family is a module that declares one ``Family`` and one line in the registry::

    SCALE = Family(
        name="scale", build=scale_set, dims=("N",), make_args=make_scale_args,
        reference=lambda inputs, params: [2.0 * v for v in inputs[0]],
        demo_sizes=((4096,),),
    )

Pure Python (standard library and wgtune's core), as everything in ``wgtune.kernels``: it also
runs in Pyodide.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from wgtune import Args, TunableSet
from wgtune.errors import ConfigError

__all__ = ["ELEMENTS", "MAX_DIM", "Family", "Reference", "Size"]

Size = tuple[int, ...]
"""A problem size: one positive integer per ``Family.dims``, in their order."""

Reference = Callable[[Sequence[Sequence[float]], tuple], Sequence[float]]
"""``reference(inputs, params)``: the exact output of a call, from the values of its input
buffers (every buffer but the set's outputs, in order, read as ``Family.element``) and its params."""

ELEMENTS = ("f32", "f16")
MAX_DIM = 2**32
"""A catalogue's sizes are below this: the kernels read them as u32 params (past it a farm job
built buffers of many GB before failing)."""
"""What a family's buffers may hold, read back as values (``struct`` formats ``f`` and ``e``)."""


@dataclass(frozen=True)
class Family:
    """One kernel family's set, as the tools that enumerate families need it.

    - ``name``: the set's name (``build().name``), which catalogues, reports and ``--only`` use;
    - ``build``: makes the set (a new one each call; a caller that keeps compiling into one keeps it);
    - ``dims``: what the numbers of a size are, in order (``("M", "N", "K")``);
    - ``make_args(device, size)``: a call of ``size`` on any device with ``create_buffer(data)`` /
      ``create_buffer(size=...)``, its inputs seeded (the same values for the same size everywhere);
    - ``reference(inputs, params)``: the call's exact output (:data:`Reference`);
    - ``params(size)``: the call's params for ``size``, without a device: what the set's key
      function reads, so a farm plans keys with no buffers (default: the size itself);
    - ``demo_sizes``: the sizes ``wgtune tune`` and the page tune; none leaves it out of the demo;
    - ``element``: what the buffers hold (:data:`ELEMENTS`), how ``reference`` reads them.
    """

    name: str
    build: Callable[[], TunableSet]
    dims: tuple[str, ...]
    make_args: Callable[[Any, Size], Args]
    reference: Reference
    params: Callable[[Size], tuple] = tuple
    demo_sizes: tuple[Size, ...] = ()
    element: str = "f32"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"a family needs a set name, got {self.name!r}")
        if not self.dims or not all(isinstance(dim, str) and dim for dim in self.dims):
            raise ConfigError(f"family {self.name}: dims must name each number of a size, got {self.dims!r}")
        if self.element not in ELEMENTS:
            raise ConfigError(f"family {self.name}: element {self.element!r} is not one of {', '.join(ELEMENTS)}")
        for index, size in enumerate(self.demo_sizes):
            self.size(list(size), f"family {self.name}: demo_sizes[{index}]")

    def size(self, value: object, where: str) -> Size:
        """``value`` (a catalogue entry: a list of positive integers, one per dim) as a size; a
        ConfigError starting with ``where`` names what is wrong."""
        if not isinstance(value, list | tuple) or len(value) != len(self.dims):
            raise ConfigError(f"{where}: expected [{', '.join(self.dims)}], got {json.dumps(value, default=str)[:80]}")
        for dim, number in zip(self.dims, value, strict=True):
            if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number < MAX_DIM:
                shown = json.dumps(number, default=str)[:40]
                below = " below 2**32 (a kernel reads it as a u32)" if isinstance(number, int) and number > 1 else ""
                raise ConfigError(f"{where}: {dim} must be a positive integer{below}, got {shown}")
        return tuple(value)

    def key_args(self, size: Size) -> Args:
        """A call of ``size`` with no buffers: enough for the set's key function (see ``params``)."""
        return Args((), self.params(tuple(size)))
