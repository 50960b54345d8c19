"""Output checks (``Config.checks``): candidates run on identical inputs, compared with a reference.

The reference is the set's ``reference`` function when it has one: the expected outputs computed
on the host from the call's inputs, so every candidate, the first one too, is held to it (a race
in the first candidate cannot disqualify the correct ones). Without one, the reference is the
first candidate, in the set's order, that fits the device, compiles
(:meth:`PipelineCache.usable`, the same answer that picks the fallback) and runs: a set's first
candidate is its trusted default. Candidates the plan skips for this key are passed over: they
may not handle the call at all.

Outputs are compared as values of each output's type (f16 too), within its tolerance. Which of
the call's buffers they are is the set's ``outputs`` (indices, or names and ``(group, binding)``
slots found through the first candidate's bindings, ``bindings.output_indices``); by default the
buffers the first candidate's WGSL declares ``read_write``.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Collection
from typing import Any

from .args import Args
from .bindings import output_indices
from .device import Device
from .errors import CandidateError, ConfigError, Mismatch, TuneFailed, candidate_failure
from .measure import clone_args
from .pipelines import PipelineCache
from .tunable import TunableSet

__all__ = ["OutputCheck", "compare"]


class OutputCheck:
    """Compares each candidate's outputs with the reference's (see the module doc).

    Each run gets fresh copies of the pristine benchmark inputs, so kernels that write in place
    cannot skew one another.
    """

    def __init__(
        self, device: Device, tunables: TunableSet, args: Args, pipelines: PipelineCache, skipped: Collection[int] = ()
    ) -> None:
        bad = [index for index in tunables.outputs if isinstance(index, int) and not 0 <= index < len(args.buffers)]
        if bad:
            raise ConfigError(
                f"tunable set {tunables.name!r}: outputs {bad} are not buffers of a call with {len(args.buffers)}"
            )
        self.indices = output_indices(tunables, args)
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
        return [await self.device.read_buffer(args.buffers[i]) for i in self.indices]

    async def ensure_reference(self) -> None:
        if self.reference is not None:
            return
        if self.tunables.reference is not None:
            self.reference = await self._expected()
            self.reference_name = "the reference"
            return
        failures: list[CandidateError] = []
        async for index, pipeline in self.pipelines.usable(self.tunables, exclude=self.skipped, failures=failures):
            name = self.tunables.candidates[index].name
            try:
                self.reference = await self._outputs(index, pipeline)
            except Exception as error:  # a would-be reference that cannot run: try the next candidate
                failures.append(candidate_failure(name, error, "launch"))
                continue
            self.reference_name = name
            return
        raise TuneFailed(f"output checks of {self.tunables.name}: no candidate could produce reference outputs; "
                         + _why(failures))

    async def _expected(self) -> list[bytes]:
        """The set's reference function's outputs for the pristine inputs, as bytes of each
        output's type; a TuneFailed naming what is wrong with them (the whole tune depends on them)."""
        name = self.tunables.name
        inputs = [await self.device.read_buffer(buffer) for buffer in self.pristine.buffers]
        try:
            produced = list(self.tunables.reference(inputs, self.pristine.params))
        except Exception as error:
            raise TuneFailed(f"the reference of {name} raised {type(error).__name__}: {error}") from error
        if len(produced) != len(self.tunables.outputs):
            raise TuneFailed(f"the reference of {name} gave {len(produced)} outputs; "
                             f"the set has {len(self.tunables.outputs)} ({self.tunables.outputs})")
        try:
            types = [typecode for typecode, _atol, _rtol in self.tunables.tolerances]
            return [as_bytes(value, typecode) for value, typecode in zip(produced, types, strict=True)]
        except (TypeError, ValueError, struct.error) as error:
            raise TuneFailed(f"the reference of {name} gave an output that is not values: {error}") from None

    async def mismatch(self, index: int) -> Mismatch | None:
        """Why candidate ``index``'s outputs disagree with the reference's, or None."""
        await self.ensure_reference()
        name = self.tunables.candidates[index].name
        outputs = await self._outputs(index, await self.pipelines.compile(self.tunables, index))
        for slot, (got, want) in enumerate(zip(outputs, self.reference, strict=True)):
            typecode, atol, rtol = self.tunables.tolerances[slot]
            problem = compare(got, want, typecode, atol, rtol)
            if problem:
                output = self.tunables.outputs[slot]
                what = output if isinstance(output, int) else f"{output!r} ({self.indices[slot]})"
                return Mismatch(name, f"output buffer {what} disagrees with {self.reference_name}: {problem}")
        return None


def _why(failures: list[CandidateError]) -> str:
    """The candidates' reasons, once when they all say the same (the call itself is wrong then:
    its buffers, its params), else each with its candidate."""
    reasons = {failure.reason for failure in failures}
    if len(reasons) == 1:
        return f"every candidate failed on this call: {reasons.pop()}"
    return "; ".join(f"{failure.name}: {failure.reason}" for failure in failures) or "no candidate to run"


# numpy's little-endian dtypes of the typecodes, for a reference that returns numpy arrays.
_NUMPY_DTYPES = {"e": "<f2", "f": "<f4", "d": "<f8", "b": "i1", "B": "u1", "h": "<i2", "H": "<u2", "i": "<i4",
                 "I": "<u4"}


def as_bytes(value: Any, typecode: str) -> bytes:
    """An expected output as the bytes a kernel writes: bytes as they are, an array (numpy's or
    the ``array`` module's) converted to ``typecode``'s type, or a sequence of numbers packed."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if hasattr(value, "astype"):  # numpy, without importing it: the dtype the kernel writes
        return value.astype(_NUMPY_DTYPES[typecode]).tobytes()
    values = list(value)
    return struct.pack(f"<{len(values)}{typecode}", *values)


def compare(got: bytes, want: bytes, typecode: str, atol: float, rtol: float) -> str | None:
    """Why two outputs differ beyond tolerance, or None. Both are read as little-endian values of
    ``typecode`` (struct's: ``"e"`` is f16); floats agree within ``atol + rtol * |want|`` (NaN
    with NaN), integers exactly."""
    if len(got) != len(want):
        return f"{len(got)} bytes, reference has {len(want)}"
    size = struct.calcsize(typecode)
    count = len(got) // size
    a = struct.unpack(f"<{count}{typecode}", got[: count * size])
    b = struct.unpack(f"<{count}{typecode}", want[: count * size])
    exact = typecode not in "efd"
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
