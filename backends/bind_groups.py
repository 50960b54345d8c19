"""The bind groups of a call's launches: made once per compiled stage and call arguments, kept in
``args.cache`` with the params uniform and scratch buffers they hold. Stages of a declared layout
(``Kernel.layout``) that bind the same buffers share one group.

A mixin of :class:`~wgtune.backends.webgpu.WebGPUDevice`, apart so that the device's module holds
the pass and timing algorithm. It uses the device's ``shim``, ``limits``, ``create_buffer`` and
``_refuse_buffers`` (``call_launches.py``).

Pure Python (the standard library and ``wgtune`` only): it imports in CPython and in Pyodide.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from wgtune.errors import KernelError
from wgtune.gpu.device import CompiledKernel
from wgtune.sets.args import Args
from wgtune.sets.bindings import PARAMS, Scratch, params_of, stage_entries
from wgtune.sets.kernel import Kernel
from wgtune.sets.uniforms import uniform_bytes

__all__ = ["DECLARED_GROUPS", "BindGroups"]

DECLARED_GROUPS = "wgtune-declared-groups"  # args.cache: the call's bind groups of declared layouts


class BindGroups:
    """Bind groups, params uniforms and scratch buffers for a call's ``args`` (the device's mixin)."""

    shim: Any
    limits: Any
    create_buffer: Callable[..., Any]
    _refuse_buffers: Callable[[Kernel, Sequence[tuple[int, int, Any]]], None]

    def _bind_groups(self, stage: CompiledKernel, args: Args) -> tuple[int, Any, tuple[tuple[int, Any], ...]]:
        """``stage``'s bind groups for ``args``, made on first use and kept in ``args.cache``: the
        first group's index and bind group, and ``(index, bind group)`` of any further ones (kept
        apart so that the pass loop sets the usual single group with no loop of its own)."""
        groups = args.cache.get(stage)
        if groups is None:
            (index, group), *more = self._create_bind_groups(stage, args)
            groups = args.cache[stage] = (index, group, tuple(more))
        return groups

    def _create_bind_groups(self, stage: CompiledKernel, args: Args) -> tuple[tuple[int, Any], ...]:
        """One ``(index, bind group)`` per group the stage binds, with the call's buffers and
        params where the stage's WGSL declares them (``bindings.stage_entries``; without a plan,
        buffer ``i`` at binding ``i`` of group 0 and the params right after), and an empty one for
        each group below the highest that it leaves out (its layout has them, empty). The params
        uniform holds the stage's own ``params`` or the call's, packed as the stage declares it
        (``uniforms.py``); stages whose uniforms pack alike share one buffer per ``args``."""
        by_group: dict[int, list[tuple[int, Any]]] = {}
        params = None
        entries = stage_entries(stage.bindings, args, stage.kernel.name)
        declared = stage.kernel.layout == "declared"
        if stage.bindings is not None and not declared:  # a binding the source never uses has no place in "auto"
            unused = {(slot.group, slot.binding) for slot in stage.bindings.slots if not slot.used}
            entries = [entry for entry in entries if entry[:2] not in unused] if unused else entries
        self._refuse_buffers(stage.kernel, entries)
        for group, binding, buffer in entries:
            if buffer is PARAMS:
                params = params_of(stage.kernel, args) if params is None else params
                if not params:
                    if declared:  # its layout has the uniform, used or not: the group must bind one
                        raise KernelError(f"{stage.kernel.name} declares the uniform at @group({group}) "
                                          f"@binding({binding}) and layout='declared' binds every declared "
                                          "buffer, but the call has no params to fill it")
                    continue
                buffer = self._uniform(stage.kernel, params, group, binding, args)
            elif isinstance(buffer, Scratch):
                buffer = self._scratch(buffer, args)
            by_group.setdefault(group, []).append((binding, buffer))
        for index in range(max(by_group, default=0) + 1):
            by_group.setdefault(index, [])
        if declared:
            return ((0, self._declared_group(stage.layout, sorted(by_group[0], key=lambda entry: entry[0]), args)),)
        try:
            return tuple(
                (index, self.shim.create_bind_group(
                    stage.layout if index == 0 else self.shim.bind_group_layout(stage.pipeline, index),
                    sorted(entries, key=lambda entry: entry[0])))
                for index, entries in sorted(by_group.items())
            )
        except KernelError as error:
            raise KernelError(f"cannot bind the call's buffers: {error}") from None

    def _declared_group(self, layout: Any, entries: list[tuple[int, Any]], args: Args) -> Any:
        """The bind group of a declared ``layout`` (``Kernel.layout``) with ``entries``, made once
        per call: a candidate's stages that declare the same bindings and bind the same buffers
        there (the same params too) get one group object, which a launch sets once for all of
        them (``batch_recorder.encode_launches``). Compared by identity, as the objects are the
        backend's own (JS proxies in a browser)."""
        made = args.cache.setdefault(DECLARED_GROUPS, [])
        for known_layout, known_entries, group in made:
            if known_layout is layout and len(known_entries) == len(entries) and all(
                    binding == known_binding and buffer is known_buffer
                    for (binding, buffer), (known_binding, known_buffer) in zip(entries, known_entries, strict=True)):
                return group
        try:
            group = self.shim.create_bind_group(layout, entries)
        except KernelError as error:
            raise KernelError(f"cannot bind the call's buffers: {error}") from None
        made.append((layout, entries, group))
        return group

    def _scratch(self, scratch: Scratch, args: Args) -> Any:
        """The scratch buffer ``scratch`` for the call (``Kernel.scratch``): one per name and size
        and ``args``, kept in ``args.cache`` like the bind groups that hold it; a KernelError for a
        size that is no whole number of bytes or more than a storage binding may hold."""
        try:
            size = scratch.size(args)
        except Exception as error:
            raise KernelError(f"scratch {scratch.name!r}: its size function failed: "
                              f"{type(error).__name__}: {error}") from None
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise KernelError(f"scratch {scratch.name!r}: its size must be bytes >= 0, got {size!r}")
        if size > self.limits.max_storage_binding:
            raise KernelError(f"exceeds a device limit: scratch {scratch.name!r} of {size} bytes, the device binds "
                              f"at most {self.limits.max_storage_binding} bytes of storage")
        buffer = args.cache.get(("scratch", scratch.name, size))
        if buffer is None:
            buffer = args.cache[("scratch", scratch.name, size)] = self.create_buffer(size=size)
        return buffer

    def _uniform(self, kernel: Kernel, params: tuple, group: int, binding: int, args: Args) -> Any:
        """The uniform buffer of ``params`` as ``kernel`` reads them there, one per packed value
        and ``args``."""
        data = uniform_bytes(kernel, params, binding, group)
        uniform = args.cache.get(("params", data))
        if uniform is None:
            uniform = self.shim.create_buffer(len(data), self.shim.UNIFORM | self.shim.COPY_DST)
            self.shim.write_buffer(uniform, 0, data)
            args.cache[("params", data)] = uniform
        return uniform
