"""A JavaScript call ``{buffers, params}`` of a set defined from JavaScript, made into Args and checked.

A call that cannot run is refused here, before any tune starts, with a ConfigError naming what is
wrong (``field`` names the param): a param that is not a finite number, one its WGSL field cannot
hold (``n: 1.5`` for a ``u32``, ``-1`` for a ``u32``), params missing where the WGSL reads a
uniform from them (no ``params``, ``[]`` or ``{}`` alike), a buffer that is not a ``GPUBuffer``
(``null``, a number), buffers that no candidate can bind (a storage binding the call gives no
buffer for, a name no candidate declares). What only WebGPU can tell (a buffer's usage, size,
device) is the launch's to refuse (``call_launches.py``).

Each check runs once per new Args: a set keeps its recent calls (:class:`RecentCalls`), so a call
repeated with the same buffers and params costs a dict lookup.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from wgtune.errors import ConfigError, KernelError
from wgtune.sets.args import Args
from wgtune.sets.bindings import PARAMS, binding_plan, stage_entries
from wgtune.sets.kernel import Kernel
from wgtune.sets.tunable import TunableSet
from wgtune.sets.uniforms import param_names, param_scalars, params_at, params_by_name, uniform_bytes
from wgtune.wgsl.syntax import WgslError

from .js_errors import js_value
from .js_set_spec import plain

__all__ = ["RECENT_CALLS", "RecentCalls"]

RECENT_CALLS = 64
"""Calls (buffers and params) a set keeps as Args, most recent first, so a repeated call makes no
new bind groups."""

_INTEGER_RANGES = {"u32": (0, 2**32), "i32": (-(2**31), 2**31)}


class RecentCalls:
    """The Args of a set's recent calls, made and checked once each (see the module doc)."""

    def __init__(self, tunables: TunableSet) -> None:
        self.tunables = tunables
        self._recent: OrderedDict[tuple, Args] = OrderedDict()

    def args(self, call: Any) -> Args:
        """The call as Args (params by name in the struct's order); a ConfigError where it cannot run."""
        name = self.tunables.name
        call = plain(call)
        if not isinstance(call, Mapping) or "buffers" not in call:
            raise ConfigError(f"set {name!r}: a call is {{buffers, params}}, got {js_value(call)}")
        buffers = call["buffers"]
        params = self._params(call.get("params", ()))
        if isinstance(buffers, Mapping):
            named = tuple((str(key), buffer) for key, buffer in buffers.items())
        elif isinstance(buffers, (list, tuple)):
            named = tuple((None, buffer) for buffer in buffers)
        else:
            raise ConfigError(f"set {name!r}: buffers must be an object by WGSL name or an array, "
                              f"got {js_value(buffers)}", field="buffers")
        # The same buffers and params again (a frame's kernels, say): the same Args, whose bind
        # groups and uniform the device made on the first call (``Args.cache``).
        same = (tuple((key, getattr(buffer, "js_id", None) or id(buffer)) for key, buffer in named), params)
        args = self._recent.get(same)
        if args is not None:
            self._recent.move_to_end(same)
            return args
        by_name = isinstance(buffers, Mapping)
        self._check_buffer_values(named)
        args = Args(dict(named) if by_name else tuple(buffer for _, buffer in named), params)
        self._check_params(params)
        self._check_params_given(args, self._check_buffers(args))
        self._recent[same] = args
        if len(self._recent) > RECENT_CALLS:
            self._recent.popitem(last=False)
        return args

    def _params(self, params: Any) -> tuple:
        name = self.tunables.name
        params = plain(params) if params is not None else ()
        names = param_names(self.tunables.candidates[0])
        if isinstance(params, Mapping) and not params:
            params = ()  # none by name: as none in order (_check_params_given says what is missing)
        elif isinstance(params, Mapping):
            try:
                params = params_by_name(self.tunables.candidates[0], params)
            except ConfigError as error:
                raise ConfigError(f"set {name!r}: {error}", field="params") from None
        elif not isinstance(params, (list, tuple)):
            raise ConfigError(f"set {name!r}: params must be an object by field name or an array, "
                              f"got {js_value(params)}", field="params")
        for index, value in enumerate(params):
            field = names[index] if names and index < len(names) else f"params[{index}]"
            for item in _flat([value]):
                if isinstance(item, bool) or not isinstance(item, (int, float)) or not math.isfinite(item):
                    raise ConfigError(f"set {name!r}: param {field} must be a finite number, got {js_value(item)}",
                                      field=field)
        return _frozen(params)

    def _check_params(self, params: tuple) -> None:
        """A param its WGSL field cannot hold (a fraction or a negative number for a u32, one out
        of range) is refused, naming the field; then the uniform is packed once as a launch would."""
        kernel = self.tunables.candidates[0]
        names, scalars = param_names(kernel), param_scalars(kernel)
        for field, scalar, value in zip(names or (), scalars or (), params, strict=False):
            bounds = _INTEGER_RANGES.get(scalar or "")
            if bounds is None:
                continue
            for item in _flat([value]):
                if not float(item).is_integer():
                    raise ConfigError(f"set {self.tunables.name!r}: param {field} is a {scalar} in the WGSL: "
                                      f"{js_value(item)} is not a whole number", field=field)
                if not bounds[0] <= item < bounds[1]:
                    raise ConfigError(f"set {self.tunables.name!r}: param {field} is a {scalar} in the WGSL: "
                                      f"{js_value(item)} is out of its range [{bounds[0]}, {bounds[1] - 1}]",
                                      field=field)
        at = params_at(kernel)
        if at is not None and params:
            try:
                uniform_bytes(kernel, params, at[1], at[0])
            except WgslError as error:
                raise ConfigError(f"set {self.tunables.name!r}: {error}", field="params") from None

    def _check_buffer_values(self, named: tuple[tuple[str | None, Any], ...]) -> None:
        """Refused where a buffer is not a GPUBuffer (``null``, a number, a plain object): named."""
        for index, (name, buffer) in enumerate(named):
            if isinstance(buffer, (Mapping, list, tuple, str, int, float)) or not hasattr(buffer, "size"):
                which = f"buffer {name!r}" if name is not None else f"buffer {index}"
                raise ConfigError(f"set {self.tunables.name!r}: {which} must be a GPUBuffer, got {js_value(buffer)}",
                                  field="buffers")

    def _check_buffers(self, args: Args) -> tuple[Kernel, list[list[tuple[int, int, Any]]]]:
        """Refused where no candidate can bind the call's buffers (candidate 0's reason said);
        else the first candidate that can, and each of its stages' bindings for the call."""
        first = None
        for kernel in self.tunables.candidates:
            try:
                plan = binding_plan(kernel)
                stages = [stage_entries(plan[index] if plan else None, args, stage.name)
                          for index, stage in enumerate(kernel.stages)]
            except KernelError as error:
                first = first or str(error)
                continue
            return kernel, stages
        raise ConfigError(f"set {self.tunables.name!r}: the call cannot run: {first}", field="buffers")

    def _check_params_given(self, args: Args, bound: tuple[Kernel, list[list[tuple[int, int, Any]]]]) -> None:
        """Refused where the call gives no params and a stage reads its uniform from them (one
        without a ``params`` function of its own): WebGPU would refuse the launch for the missing
        binding. Names the missing fields, as ``params: {}`` does."""
        kernel, stages = bound
        if args.params:
            return
        for stage, entries in zip(kernel.stages, stages, strict=True):
            if stage.params is None and any(buffer is PARAMS for _, _, buffer in entries):
                name = self.tunables.name
                if param_names(stage):
                    try:
                        params_by_name(stage, {})
                    except ConfigError as error:
                        raise ConfigError(f"set {name!r}: {error}", field="params") from None
                group, binding = next((group, binding) for group, binding, buffer in entries if buffer is PARAMS)
                raise ConfigError(f"set {name!r}: the call gives no params, and candidate {stage.name!r} reads its "
                                  f"uniform at @group({group}) @binding({binding}) from them", field="params")


def _frozen(values: Sequence[Any]) -> tuple:
    """Params with nested lists (a vector field's values) as tuples: hashable, as Args keeps them."""
    return tuple(_frozen(value) if isinstance(value, (list, tuple)) else value for value in values)


def _flat(values: Sequence[Any]) -> list[Any]:
    flat: list[Any] = []
    for value in values:
        flat.extend(_flat(value) if isinstance(value, (list, tuple)) else [value])
    return flat
