"""Tunable sets defined from JavaScript, tuned and run on the page's own buffers.

A web app describes its kernels as plain JavaScript (``wgtune.defineSet({...})`` in
``web/sets.js``) and calls them with its own ``GPUBuffer``\\s and params on every call; no Python
of its own. This module turns that description into a :class:`~wgtune.TunableSet` and each call
into :class:`~wgtune.Args`, and answers ``check``/``execute``/``settle`` for it
(:class:`JsSet`). What a set may say (JavaScript names, camelCase)::

    name            the set's name (its stored winners are kept under it)
    candidates      [{name, wgsl, grid, entryPoint?, constants?, workgroupSize?, workgroupStorage?,
                      features?, priority?, params?, then?: [stage, ...],
                      scratch?: {wgslName: bytes | (call) => bytes}}, ...]
    space           or one source and parameter lists: {name?, source | render(point), params,
                      default, grid(point, call), restrict?(point), constants?(point),
                      workgroupSize?(point), entryPoint?, features?}
    key(call)       the autotune key, an object of numbers and strings (default: the call's params)
    outputs, outputType, atol, rtol   what output checks compare (as ``TunableSet`` takes them)
    reference(call, inputs)           expected outputs: an array of typed arrays, one per output
    search          {strategy?, candidates?, seconds?, seed?} for a space too large to try whole

A call is ``{buffers, params}``: buffers by the WGSL's names (``{x: bufX, y: bufY}``) or in order
(an array); params by the uniform struct's field names (``{n: 1000, scale: 2.0}``) or in order.
Each is packed as the WGSL declares it (``uniforms.py``), so a JavaScript ``2.0``, which reaches
Python as the int 2, fills an ``f32`` as 2.0. The functions of a set (``grid``, ``key``,
``params``) receive a view of the call: ``{params, buffers}``, the params as given (by name when
the uniform is a struct) and each buffer's size in bytes, by name or in order: the benchmark
calls them on its own copies of the buffers too.

JavaScript values reach here as Pyodide converts them (``to_py``: objects as dicts, arrays as
lists, functions still callable); the functions' arguments go back through ``to_js``. Both are
given, so the module is tested natively with plain Python values.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from wgtune.errors import ConfigError, LaunchRefused, WgtuneError
from wgtune.key import Key
from wgtune.search.strategies import Search
from wgtune.sets.args import Args
from wgtune.sets.kernel import Kernel
from wgtune.sets.space import Space
from wgtune.sets.tunable import TunableSet
from wgtune.sets.uniforms import param_names, params_by_name
from wgtune.state import Hit, Pending
from wgtune.store.results import result_to_json
from wgtune.tune.checks import TypedValues

__all__ = ["RECENT_CALLS", "JsSet", "define_set"]

RECENT_CALLS = 64
"""Calls (buffers and params) a set keeps as Args, most recent first, so a repeated call makes no
new bind groups."""

_CANDIDATE_FIELDS = {"name", "wgsl", "grid", "entryPoint", "constants", "workgroupSize", "workgroupStorage",
                     "features", "priority", "params", "then", "scratch"}
_SET_FIELDS = {"name", "candidates", "space", "key", "outputs", "outputType", "atol", "rtol", "reference", "search"}


def _plain(value: Any) -> Any:
    """A JavaScript value as Python data (what ``to_py`` makes); Python values as they are."""
    return value.to_py() if hasattr(value, "to_py") else value


def _function(value: Any, where: str) -> Callable:
    if not callable(value):
        raise ConfigError(f"{where} must be a function, got {value!r}")
    return value


def _grid(answer: Any, where: str) -> tuple[int, int, int]:
    grid = _plain(answer)
    if isinstance(grid, (int, float)):
        grid = [grid]
    if not isinstance(grid, (list, tuple)) or not 1 <= len(grid) <= 3:
        raise ConfigError(f"{where} must give 1 to 3 workgroup counts, got {grid!r}")
    counts = [*grid, 1, 1][:3]
    if any(isinstance(n, bool) or not isinstance(n, (int, float)) or n != int(n) or n < 0 for n in counts):
        raise ConfigError(f"{where} gave {grid!r}: workgroup counts are whole numbers >= 0")
    return (int(counts[0]), int(counts[1]), int(counts[2]))


class _Calls:
    """What the set's JavaScript functions see of a call (see the module doc), made once per Args."""

    def __init__(self, to_js: Callable[[Any], Any]) -> None:
        self.to_js = to_js
        self.names: tuple[str, ...] | None = None  # the params' field names, once candidate 0 is known

    def view(self, args: Args) -> Any:
        view = args.cache.get("js-call")
        if view is None:
            params: Any = dict(zip(self.names, args.params, strict=False)) if self.names else list(args.params)
            if args.names is not None:
                buffers: Any = {str(name): int(buffer.size) for name, buffer in zip(args.names, args.buffers,
                                                                                     strict=True)}
            else:
                buffers = [int(buffer.size) for buffer in args.buffers]
            view = args.cache["js-call"] = self.to_js({"params": params, "buffers": buffers})
        return view

    def function(self, fn: Any, where: str, shape: Callable[[Any, str], Any]) -> Callable[[Args], Any]:
        """``fn`` (a JavaScript function of the call's view) as a function of Args; its answer
        shaped (and checked) by ``shape``."""
        _function(fn, where)

        def call(args: Args) -> Any:
            return shape(fn(self.view(args)), where)

        return call


def _candidate(spec: Any, index: int, calls: _Calls) -> Kernel:
    spec = _plain(spec)
    if not isinstance(spec, Mapping):
        raise ConfigError(f"candidate {index} must be an object {{name, wgsl, grid, ...}}, got {spec!r}")
    unknown = sorted(set(spec) - _CANDIDATE_FIELDS)
    name = spec.get("name")
    where = f"candidate {name!r}" if isinstance(name, str) and name else f"candidate {index}"
    if unknown:
        known = ", ".join(sorted(_CANDIDATE_FIELDS))
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}; known: {known}")
    grid = spec.get("grid")
    if callable(grid):
        grid_of = calls.function(grid, f"{where}: grid", _grid)
    else:
        fixed = _grid(grid, f"{where}: grid (a function of the call, or fixed counts)")
        grid_of = lambda _args: fixed  # noqa: E731
    stage_params = spec.get("params")
    return Kernel(
        name, spec.get("wgsl"), grid=grid_of,
        entry_point=spec.get("entryPoint", "main"),
        constants=spec.get("constants") or {},
        workgroup_size=tuple(spec["workgroupSize"]) if spec.get("workgroupSize") is not None else None,
        workgroup_storage=spec.get("workgroupStorage"),
        features=tuple(spec.get("features") or ()),
        priority=spec.get("priority", 0),
        params=None if stage_params is None else calls.function(stage_params, f"{where}: params",
                                                               lambda answer, _w: tuple(_plain(answer))),
        then=tuple(_candidate(stage, i, calls) for i, stage in enumerate(spec.get("then") or ())),
        scratch=_scratch(spec.get("scratch"), where, calls),
    )


def _scratch(spec: Any, where: str, calls: _Calls) -> dict[str, Callable[[Args], int]]:
    """A candidate's ``scratch``: each WGSL name's size in bytes, a number or a function of the
    call (``Kernel.scratch``: the device makes the buffers, the app gives none)."""
    spec = _plain(spec)
    if spec is None:
        return {}
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{where}: scratch must be an object {{wgslName: bytes or a function of the call}}, "
                          f"got {spec!r}")
    sizes: dict[str, Callable[[Args], int]] = {}
    for name, size in spec.items():
        here = f"{where}: scratch {name!r}"
        if callable(size):
            sizes[name] = calls.function(size, here, _bytes)
        else:
            fixed = _bytes(size, here)
            sizes[name] = lambda _args, fixed=fixed: fixed
    return sizes


def _bytes(answer: Any, where: str) -> int:
    """A size in bytes as JavaScript gives it (a number; an integral float counts)."""
    size = _plain(answer)
    if isinstance(size, float) and size.is_integer():
        size = int(size)
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ConfigError(f"{where} must be a whole number of bytes >= 0, got {size!r}")
    return size


def _space(spec: Any, set_name: str, calls: _Calls) -> list[Kernel]:
    spec = _plain(spec)
    if not isinstance(spec, Mapping):
        raise ConfigError(f"set {set_name!r}: space must be an object {{source | render, params, default, grid}}")
    grid = _function(spec.get("grid"), f"set {set_name!r}: space.grid")
    render, constants, size = spec.get("render"), spec.get("constants"), spec.get("workgroupSize")
    restrict = spec.get("restrict")

    def js(fn: Any, shape: Callable[[Any], Any] = lambda value: value) -> Callable | None:
        return None if fn is None else (lambda point: shape(_plain(fn(calls.to_js(dict(point))))))

    return Space(
        spec.get("name", set_name),
        params={str(name): list(values) for name, values in dict(spec.get("params") or {}).items()},
        default=dict(spec.get("default") or {}),
        grid=lambda point, args: _grid(grid(calls.to_js(dict(point)), calls.view(args)),
                                       f"set {set_name!r}: space.grid"),
        source=spec.get("source"),
        render=js(render, str),
        restrict=js(restrict, bool) or (),
        constants=js(constants, dict),
        workgroup_size=js(size, tuple) if callable(size) else (tuple(size) if size is not None else None),
        entry_point=spec.get("entryPoint", "main"),
        features=tuple(spec.get("features") or ()),
    ).candidates()


def _reference(fn: Any, calls: _Calls, set_name: str) -> Callable:
    _function(fn, f"set {set_name!r}: reference")

    def reference(inputs: list[bytes], params: tuple) -> Sequence[Any]:
        view = calls.view(Args(tuple(_Sized(len(data)) for data in inputs), params))
        answer = fn(view, calls.to_js([memoryview(data) for data in inputs]))
        # Each output as JavaScript gave it: ``to_py`` on the whole answer would make every typed
        # array a memoryview first, losing the name that says its element type (``_expected``).
        return [_expected(item) for item in (answer if _is_js_array(answer) else _plain(answer))]

    return reference


# A typed array's element type, so that a Float32Array given for a u32 output is an error, not bytes
# read as something else (``checks.as_bytes``).
_TYPED_ARRAYS = {"Float32Array": "f", "Float64Array": "d", "Float16Array": "e", "Int32Array": "i",
                 "Uint32Array": "I", "Int16Array": "h", "Uint16Array": "H", "Int8Array": "b", "Uint8Array": "B"}


def _is_js_array(value: Any) -> bool:
    """Whether ``value`` is a JavaScript Array (a proxy whose items stay JavaScript values)."""
    return hasattr(value, "to_py") and str(getattr(getattr(value, "constructor", None), "name", "")) == "Array"


def _expected(item: Any) -> Any:
    """One output of a JavaScript reference: a typed array as :class:`~wgtune.tune.checks.TypedValues`
    of its element type, an ArrayBuffer or bytes as bytes, a plain array of numbers as it is."""
    typecode = _TYPED_ARRAYS.get(str(getattr(getattr(item, "constructor", None), "name", "")))
    plain = _plain(item)
    if typecode is not None:
        return TypedValues(typecode, bytes(plain))
    if isinstance(plain, (list, tuple)):
        return plain
    return bytes(plain)


class _Sized:
    """A stand-in buffer with a size, for the view a reference function receives."""

    def __init__(self, size: int) -> None:
        self.size = size


def define_set(session: Any, spec: Any, to_js: Callable[[Any], Any] = lambda value: value) -> JsSet:
    """The set ``spec`` describes (see the module doc), on ``session`` (a ``PageSession``); a
    ConfigError that names the field when something is wrong."""
    spec = _plain(spec)
    if not isinstance(spec, Mapping):
        raise ConfigError(f"defineSet takes an object {{name, candidates | space, key, ...}}, got {spec!r}")
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"defineSet: name must be a non-empty string, got {name!r}")
    unknown = sorted(set(spec) - _SET_FIELDS)
    if unknown:
        known = ", ".join(sorted(_SET_FIELDS))
        raise ConfigError(f"set {name!r}: unknown field(s) {', '.join(unknown)}; known: {known}")
    calls = _Calls(to_js)
    if ("candidates" in spec) == ("space" in spec):
        raise ConfigError(f"set {name!r}: give candidates (a list) or space (one source and parameter lists)")
    if "space" in spec:
        candidates = _space(spec["space"], name, calls)
    else:
        listed = _plain(spec["candidates"])
        if not isinstance(listed, (list, tuple)) or not listed:
            raise ConfigError(f"set {name!r}: candidates must be a non-empty array")
        candidates = [_candidate(candidate, index, calls) for index, candidate in enumerate(listed)]
    calls.names = param_names(candidates[0])
    key = spec.get("key")
    key_function = (_params_key(calls) if key is None
                    else calls.function(key, f"set {name!r}: key", lambda answer, _where: _plain(answer)))
    options = {option: _plain(spec[js_name]) for option, js_name in
               (("output_type", "outputType"), ("atol", "atol"), ("rtol", "rtol")) if js_name in spec}
    if spec.get("outputs") is not None:
        options["outputs"] = tuple(_plain(spec["outputs"]))
    if spec.get("reference") is not None:
        options["reference"] = _reference(spec["reference"], calls, name)
    if spec.get("search") is not None:
        options["search"] = _search(_plain(spec["search"]), name)
    return JsSet(session, TunableSet(name, candidates, key=key_function, **options), calls)


def _search(spec: Any, set_name: str) -> Search:
    if not isinstance(spec, Mapping):
        raise ConfigError(f"set {set_name!r}: search must be an object "
                          "{strategy, candidates, seconds, seed, options}")
    try:
        return Search(**dict(spec))
    except TypeError as error:
        known = "strategy, candidates, seconds, seed, options"
        raise ConfigError(f"set {set_name!r}: search: {error}; known: {known}") from None


def _params_key(calls: _Calls) -> Callable[[Args], dict]:
    """The default key: the call's params, by field name or position."""

    def key(args: Args) -> dict:
        if calls.names:
            return dict(zip(calls.names, args.params, strict=False))
        return {f"p{index}": value for index, value in enumerate(args.params)}

    return key


class JsSet:
    """One set defined from JavaScript, on a page session: its calls' states, runs and waits,
    answered as JSON text (what ``web/sets.js`` parses)."""

    def __init__(self, session: Any, tunables: TunableSet, calls: _Calls) -> None:
        self.session = session
        self.tunables = tunables
        self._calls = calls
        self._recent: OrderedDict[tuple, Args] = OrderedDict()

    @property
    def name(self) -> str:
        return self.tunables.name

    def candidate_names(self) -> list[str]:
        return [kernel.name for kernel in self.tunables.candidates]

    def args(self, call: Any) -> Args:
        """A JavaScript call ``{buffers, params}`` as Args (params by name in the struct's order)."""
        call = _plain(call)
        if not isinstance(call, Mapping) or "buffers" not in call:
            raise ConfigError(f"set {self.name!r}: a call is {{buffers, params}}, got {call!r}")
        buffers, params = call["buffers"], call.get("params", ())
        params = _plain(params) if params is not None else ()
        if isinstance(params, Mapping):
            params = params_by_name(self.tunables.candidates[0], params)
        elif not isinstance(params, (list, tuple)):
            raise ConfigError(f"set {self.name!r}: params must be an object by field name or an array, got {params!r}")
        for value in _flat(params):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"set {self.name!r}: params must be finite numbers, got {value!r}")
        params = _frozen(params)
        if isinstance(buffers, Mapping):
            named = tuple((str(name), buffer) for name, buffer in buffers.items())
        elif isinstance(buffers, (list, tuple)):
            named = tuple((None, buffer) for buffer in buffers)
        else:
            raise ConfigError(f"set {self.name!r}: buffers must be an object by WGSL name or an array, got {buffers!r}")
        # The same buffers and params again (a frame's kernels, say): the same Args, whose bind
        # groups and uniform the device made on the first call (``Args.cache``).
        same = (tuple((name, getattr(buffer, "js_id", None) or id(buffer)) for name, buffer in named), params)
        args = self._recent.get(same)
        if args is None:
            by_name = isinstance(buffers, Mapping)
            args = Args(dict(named) if by_name else tuple(buffer for _, buffer in named), params)
            self._recent[same] = args
            if len(self._recent) > RECENT_CALLS:
                self._recent.popitem(last=False)
        else:
            self._recent.move_to_end(same)
        return args

    def _answer(self, key: Key) -> dict:
        tuner = self.session.tuner
        state = tuner.cache.answer(self.tunables, key)
        answer: dict[str, Any] = {"set": self.name, "key": dict(key), "state": type(state).__name__}
        if isinstance(state, Hit):
            answer["winner"] = self.tunables.candidates[state.index].name
        failure = tuner.failures.get((self.tunables.name, key))
        if failure is not None and not isinstance(state, (Hit, Pending)):
            answer["failure"] = str(failure)
        return answer

    def check(self, call: Any) -> str:
        """The call's key's state; on a miss the tune starts (on the event loop) and this says Pending.
        A call whose buffers WebGPU would refuse (``Device.check_call``) is LaunchRefused, not tuned."""
        args = self.args(call)
        tuner = self.session.tuner
        key = tuner.key(self.tunables, args)
        if not isinstance(tuner.fastest(self.tunables, key), Hit):
            try:  # a call WebGPU would refuse is not tuned: its error is the caller's
                tuner.device.check_call(self.tunables.for_key(key).candidates[0], args)
            except LaunchRefused as error:
                raise LaunchRefused(f"set {self.name!r} [{key}]: {error}") from None
            state = tuner.check_tune(self.tunables, key, args)
            if isinstance(state, Pending):
                self.session.notify_pending(self.name, key)
        return json.dumps(self._answer(key))

    def execute(self, call: Any) -> str | Awaitable[str]:
        """Run the key's winner on the call (the fallback while it is Pending, starting a tune on
        a miss); which ran. The launch is encoded (or recorded into an open batch,
        ``web/batch.js``) before this returns; JavaScript gets a promise of the answer.

        A launch WebGPU refuses is this call's LaunchRefused: raised here where the call's
        buffers or grid show it; for the call's first launch on its buffers, where only WebGPU
        can tell (a destroyed buffer, another device's), the answer is an awaitable instead,
        which raises WebGPU's refusal once its error scope closes (``set.execute`` awaits it).
        Its launches after that one answer at once."""
        args = self.args(call)
        tuner = self.session.tuner
        kernel = tuner.execute(self.tunables, args)
        key = tuner.key(self.tunables, args)
        take = getattr(tuner.device, "take_launch_scope", None)
        scope = take(args) if take is not None else None
        if scope is None:
            return json.dumps({**self._answer(key), "ran": kernel.name})
        return self._after_scope(scope, key, kernel.name)

    async def _after_scope(self, scope: Awaitable[None], key: Key, ran: str) -> str:
        """The answer of a call's first launch, once WebGPU validated it; its refusal raised as
        LaunchRefused naming the set and key."""
        try:
            await scope
        except LaunchRefused as error:
            raise LaunchRefused(f"set {self.name!r} [{key}]: {error}") from None
        return json.dumps({**self._answer(key), "ran": ran})

    async def settle(self, call: Any, timeout: float = 600.0) -> str:
        """Wait while the call's key is Pending; its state after. A WgtuneError past ``timeout`` s."""
        args = self.args(call)
        tuner = self.session.tuner
        key = tuner.key(self.tunables, args)
        deadline = time.monotonic() + timeout
        while isinstance(tuner.fastest(self.tunables, key), Pending):
            if time.monotonic() > deadline:
                raise WgtuneError(f"{self.name} [{key}] still Pending after {timeout} s")
            await asyncio.sleep(0.02)
        return json.dumps(self._answer(key))

    def results(self, call: Any) -> str:
        """Every candidate's result for the call's key, as stored (JSON), or null when undecided."""
        args = self.args(call)
        key = self.session.tuner.key(self.tunables, args)
        results = self.session.tuner.results(self.tunables, key)
        return json.dumps(None if results is None else [result_to_json(result) for result in results])


def _frozen(values: Sequence[Any]) -> tuple:
    """Params with nested lists (a vector field's values) as tuples: hashable, as Args keeps them."""
    return tuple(_frozen(value) if isinstance(value, (list, tuple)) else value for value in values)


def _flat(values: Sequence[Any]) -> list[Any]:
    flat: list[Any] = []
    for value in values:
        flat.extend(_flat(value) if isinstance(value, (list, tuple)) else [value])
    return flat
