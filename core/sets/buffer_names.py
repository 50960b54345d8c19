"""How a call names its buffers and a set its outputs, checked; and a candidate's outputs by default.

A call gives its buffers in order or by name (:class:`~wgtune.sets.args.Args`): each name is a WGSL
variable's name (``"x"``) or a ``(group, binding)`` pair. A set's ``outputs`` are buffer indices
or such names. Where a name binds is read per stage from the WGSL (``bindings.py``); this module
only checks the names' form, and reads which bindings a candidate writes (:func:`written_by`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..errors import ConfigError
from ..wgsl.declarations import WgslError, reflect

__all__ = ["BufferName", "Output", "checked_names", "checked_outputs", "written_by"]

# What a call names a buffer by: the WGSL variable's name, or its ``(group, binding)``.
BufferName = str | tuple[int, int]
# An output to check: an index into the call's buffers, or a buffer's name or (group, binding).
Output = int | BufferName


def _slot(value: object) -> tuple[int, int] | None:
    """``value`` as a ``(group, binding)`` pair of ints >= 0, or None where it is none."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        return None
    if any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in value):
        return None
    return value[0], value[1]


def checked_names(names: Iterable[object], count: int) -> tuple[BufferName, ...]:
    """A call's buffer names, one per buffer (``count``), as str or ``(group, binding)``; a
    ConfigError naming what is wrong."""
    checked: list[BufferName] = []
    for name in names:
        slot = _slot(name)
        if not (isinstance(name, str) and name) and slot is None:
            raise ConfigError(f"Args: a buffer is named by a WGSL variable's name or a (group, binding) pair, "
                              f"not {name!r}")
        checked.append(name if isinstance(name, str) else slot)  # type: ignore[arg-type]
    if len(checked) != count:
        raise ConfigError(f"Args: {len(checked)} names for {count} buffers")
    repeated = sorted({repr(n) for n in checked if checked.count(n) > 1})
    if repeated:
        raise ConfigError(f"Args: buffer names repeat: {', '.join(repeated)}")
    return tuple(checked)


def checked_outputs(set_name: str, outputs: Iterable[object]) -> tuple[Output, ...]:
    """A set's outputs as indices (int >= 0), names or ``(group, binding)`` pairs; a ConfigError
    naming what is wrong."""
    checked: list[Output] = []
    for output in outputs:
        index = isinstance(output, int) and not isinstance(output, bool) and output >= 0
        slot = _slot(output)
        if not index and not (isinstance(output, str) and output) and slot is None:
            raise ConfigError(f"tunable set {set_name!r}: an output is a buffer's index, its WGSL name or its "
                              f"(group, binding), not {output!r}")
        checked.append(slot if slot is not None else output)  # type: ignore[arg-type]
    return tuple(checked)


def written_by(sources: Sequence[str]) -> tuple[str, ...]:
    """The names of the ``var<storage, read_write>`` bindings of a candidate's stages (their WGSL
    ``sources``, in dispatch order), stage by stage in ``(group, binding)`` order, less those a
    later stage declares read-only (scratch handed from one stage to the next): what its output
    checks compare by default. Empty where a stage's WGSL is beyond the reflection."""
    stages = []
    for source in sources:
        try:
            stages.append(sorted(reflect(source).bindings, key=lambda b: (b.group, b.binding)))
        except WgslError:
            return ()
    written: list[str] = []
    for index, bindings in enumerate(stages):
        read_later = {b.name for later in stages[index + 1:] for b in later if b.access == "read"}
        written += [b.name for b in bindings
                    if b.access == "read_write" and b.name not in read_later and b.name not in written]
    return tuple(written)
