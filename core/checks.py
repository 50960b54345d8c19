"""Output checks (``Config.checks``): candidates run on identical inputs, compared with a reference.

The reference is the first candidate, in the set's order, that fits the device, compiles
(:meth:`PipelineCache.usable`, the same answer that picks the fallback) and runs: a set's first
candidate is its trusted default. Candidates the plan skips for this key are passed over: they
may not handle the call at all.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Collection
from typing import Any

from .device import Device
from .errors import ConfigError, Mismatch, TuneFailed
from .measure import clone_args
from .pipelines import PipelineCache
from .tunable import Args, TunableSet

__all__ = ["OutputCheck", "compare"]


class OutputCheck:
    """Compares each candidate's outputs with the reference's (see the module doc).

    Each run gets fresh copies of the pristine benchmark inputs, so kernels that write in place
    cannot skew one another.
    """

    def __init__(
        self, device: Device, tunables: TunableSet, args: Args, pipelines: PipelineCache, skipped: Collection[int] = ()
    ) -> None:
        bad = [index for index in tunables.outputs if not 0 <= index < len(args.buffers)]
        if bad:
            raise ConfigError(
                f"tunable set {tunables.name!r}: outputs {bad} are not buffers of a call with {len(args.buffers)}"
            )
        self.device = device
        self.skipped = frozenset(skipped)
        self.tunables = tunables
        self.pristine = clone_args(device, args)
        self.pipelines = pipelines
        self.reference: list[bytes] | None = None
        self.reference_name: str | None = None

    async def _outputs(self, index: int, pipeline: Any) -> list[bytes]:
        kernel = self.tunables.candidates[index]
        args = clone_args(self.device, self.pristine)
        self.device.dispatch(pipeline, args, tuple(kernel.grid(args)))
        return [await self.device.read_buffer(args.buffers[i]) for i in self.tunables.outputs]

    async def ensure_reference(self) -> None:
        if self.reference is not None:
            return
        async for index, pipeline in self.pipelines.usable(self.tunables, exclude=self.skipped):
            try:
                self.reference = await self._outputs(index, pipeline)
            except Exception:  # a would-be reference that cannot run: try the next candidate
                continue
            self.reference_name = self.tunables.candidates[index].name
            return
        raise TuneFailed(f"output checks of {self.tunables.name}: no candidate could produce reference outputs")

    async def mismatch(self, index: int) -> Mismatch | None:
        """Why candidate ``index``'s outputs disagree with the reference's, or None."""
        await self.ensure_reference()
        name = self.tunables.candidates[index].name
        outputs = await self._outputs(index, await self.pipelines.compile(self.tunables, index))
        for slot, (got, want) in enumerate(zip(outputs, self.reference, strict=True)):
            problem = compare(got, want, self.tunables.output_type, self.tunables.atol, self.tunables.rtol)
            if problem:
                output = self.tunables.outputs[slot]
                return Mismatch(name, f"output buffer {output} disagrees with {self.reference_name}: {problem}")
        return None


def compare(got: bytes, want: bytes, typecode: str, atol: float, rtol: float) -> str | None:
    """Why two outputs differ beyond tolerance, or None."""
    if len(got) != len(want):
        return f"{len(got)} bytes, reference has {len(want)}"
    a, b = array(typecode), array(typecode)
    usable = len(got) - len(got) % a.itemsize
    a.frombytes(got[:usable])
    b.frombytes(want[:usable])
    exact = typecode not in "fd"
    bad = 0
    first = None
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        # Infinities agree only with themselves (inf - inf is NaN; a tolerance relative to inf admits all).
        close = math.isfinite(y) and abs(x - y) <= atol + rtol * abs(y)
        ok = x == y or (not exact and (close or (math.isnan(x) and math.isnan(y))))
        if not ok:
            bad += 1
            if first is None:
                first = (i, x, y)
    if not bad:
        return None
    i, x, y = first
    return f"{bad} of {len(a)} values differ; first at [{i}]: {x!r} vs {y!r}"
