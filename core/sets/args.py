"""A call's inputs (:class:`Args`) and how its numbers reach a kernel (:func:`pack_params`).

Calls hand a set their inputs as :class:`Args`: device buffers, in order or by the names (or
``(group, binding)`` slots) the WGSL gives them, and small numbers (sizes) that go to the kernel
in its uniform buffer. Where each buffer binds is read from each stage's WGSL
(``bindings.py``). Key functions read the numbers; the core never looks into buffers.
"""

from __future__ import annotations

import numbers
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from .buffer_names import BufferName, checked_names

__all__ = ["Args", "Grid", "pack_params"]

Grid = tuple[int, int, int]
"""Workgroup counts (or a workgroup's size) in x, y and z."""


def pack_params(params: Sequence[int | float]) -> bytes:
    """Pack numbers as the uniform buffer a kernel reads: ints as u32 (i32 if negative), floats as f32.

    numpy's scalars count as what they are (``np.uint32`` an int, ``np.float32`` a float). Padded
    to a multiple of 16 bytes, as uniform buffers require.
    """
    out = bytearray()
    for index, value in enumerate(params):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ConfigError(f"param {index} is {value!r}: params must be ints or floats")
        value = int(value) if isinstance(value, numbers.Integral) else float(value)
        if isinstance(value, float):
            out += struct.pack("<f", value)
        elif 0 <= value < 2**32:
            out += struct.pack("<I", value)
        elif -(2**31) <= value < 0:
            out += struct.pack("<i", value)
        else:
            raise ConfigError(f"param {index} = {value} does not fit in 32 bits")
    padded_size = max(16, -(-len(out) // 16) * 16)
    return bytes(out) + bytes(padded_size - len(out))


@dataclass(frozen=True, eq=False)
class Args:
    """A call's inputs: its buffers, and ``params`` for the kernel's uniform (if any).

    Buffers are given in order (a sequence: bound in ``(group, binding)`` order, the params
    uniform's binding skipped) or by name (a mapping from the WGSL variable's name, or from a
    ``(group, binding)`` pair, to the buffer: ``{"x": x, "out": out}``). Either way ``buffers``
    is the tuple of buffers in the order given and ``names`` holds what each was named by (None:
    in order), so the core indexes buffers alike in both forms (``TunableSet.outputs``, the
    reference, ``input_gen``). Where each one binds is read per stage from its WGSL
    (``bindings.py``).

    ``cache`` is the backend's scratch space for this call's bind groups and uniform buffers, so
    that running the same Args again costs no new GPU objects.
    """

    buffers: tuple[Any, ...]
    params: tuple[int | float, ...] = ()
    cache: dict = field(default_factory=dict, repr=False)
    names: tuple[BufferName, ...] | None = None

    def __post_init__(self) -> None:
        buffers, names = self.buffers, self.names
        if isinstance(buffers, Mapping):
            if names is not None:
                raise ConfigError("Args: buffers given by name take no separate names")
            names, buffers = tuple(buffers.keys()), tuple(buffers.values())
        object.__setattr__(self, "buffers", tuple(buffers))
        object.__setattr__(self, "params", tuple(self.params))
        if names is not None:
            object.__setattr__(self, "names", checked_names(names, len(self.buffers)))

    def buffer(self, name: BufferName | int) -> Any:
        """The buffer named ``name`` (as the call named it), or at index ``name`` of ``buffers``."""
        if isinstance(name, int) and not isinstance(name, bool):
            return self.buffers[name]
        key = name if isinstance(name, str) else tuple(name)
        if self.names is None or key not in self.names:
            given = "buffers in order" if self.names is None else ", ".join(map(repr, self.names))
            raise KeyError(f"the call names no buffer {key!r} (it gives {given})")
        return self.buffers[self.names.index(key)]

    def with_buffers(self, buffers: Sequence[Any] | Mapping[BufferName, Any]) -> Args:
        """The same call on other buffers (the benchmark's copies, say): a sequence takes this
        call's names in order, a mapping names its own."""
        if isinstance(buffers, Mapping):
            return Args(buffers, self.params)
        return Args(tuple(buffers), self.params, names=self.names)
