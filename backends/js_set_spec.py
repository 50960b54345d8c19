"""A tunable set as JavaScript describes it, made into a :class:`~wgtune.TunableSet`.

A web app describes its kernels as plain JavaScript (``wgtune.defineSet({...})`` in
``web/sets.js``) and calls them with its own ``GPUBuffer``\\s and params on every call; no Python
of its own. This module turns that description into a :class:`~wgtune.TunableSet` and each call
into :class:`~wgtune.Args` (``js_sets.py``, :class:`JsSet`, answers its calls). What a set may
say (JavaScript names, camelCase)::

    name            the set's name (its stored winners are kept under it)
    candidates      [{name, wgsl, grid, entryPoint?, constants?, workgroupSize?, workgroupStorage?,
                      features?, priority?, params?, then?: [stage, ...],
                      scratch?: {wgslName: bytes | (call) => bytes}, layout?: "auto" | "declared"}, ...]
    space           or one source and parameter lists: {name?, source | render(point), params,
                      default, grid(point, call), restrict?(point), constants?(point),
                      workgroupSize?(point), entryPoint?, features?}
    key(call)       the autotune key, an object of numbers and strings (default: the call's
                      integer params rounded up to powers of two; float params left out)
    outputs, outputType, atol, rtol   what output checks compare (as ``TunableSet`` takes them; atol and
                                      rtol may be functions of the call's view, as key is)
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
given, so the module is tested natively with plain Python values. What one of the set's functions
throws is marked as the app's (``js_errors.thrown_by_app``): a call it ends gives it back to the
app as it was thrown; a tune it ends fails that candidate, saying why.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from wgtune.errors import ConfigError
from wgtune.key import anchor
from wgtune.search.strategies import Search
from wgtune.sets.args import Args
from wgtune.sets.kernel import Kernel
from wgtune.sets.space import Space
from wgtune.sets.tunable import TunableSet
from wgtune.sets.uniforms import param_names, param_scalars
from wgtune.tune.expected import TypedValues

from .js_errors import js_value, thrown_by_app

__all__ = ["Calls", "plain", "tunable_set"]

_CANDIDATE_FIELDS = {"name", "wgsl", "grid", "entryPoint", "constants", "workgroupSize", "workgroupStorage",
                     "features", "priority", "params", "then", "scratch", "layout"}
_SET_FIELDS = {"name", "candidates", "space", "key", "outputs", "outputType", "atol", "rtol", "reference", "search"}


def plain(value: Any) -> Any:
    """A JavaScript value as Python data (what ``to_py`` makes); Python values as they are."""
    return value.to_py() if hasattr(value, "to_py") else value


def _function(value: Any, where: str) -> Callable:
    if not callable(value):
        raise ConfigError(f"{where} must be a function, got {js_value(value)}")
    return value


def _app(fn: Callable, *args: Any) -> Any:
    """``fn(*args)``, one of the app's own functions: what it raises is marked as the app's."""
    try:
        return fn(*args)
    except Exception as error:
        thrown_by_app(error)
        raise


def _grid(answer: Any, where: str) -> tuple[int, int, int]:
    grid = plain(answer)
    if isinstance(grid, (int, float)):
        grid = [grid]
    if not isinstance(grid, (list, tuple)) or not 1 <= len(grid) <= 3:
        raise ConfigError(f"{where} must give 1 to 3 workgroup counts, got {js_value(grid)}")
    counts = [*grid, 1, 1][:3]
    if any(isinstance(n, bool) or not isinstance(n, (int, float)) or not math.isfinite(n) or n != int(n) or n < 0
           for n in counts):
        raise ConfigError(f"{where} gave {js_value(grid)}: workgroup counts are whole numbers >= 0")
    return (int(counts[0]), int(counts[1]), int(counts[2]))


class Calls:
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
            view = self.view(args)
            try:
                answer = fn(view)
            except Exception as error:  # the app's own: given back as it was thrown (js_errors.py)
                thrown_by_app(error)
                raise
            return shape(answer, where)

        return call


def _candidate(spec: Any, index: int, calls: Calls, set_name: str) -> Kernel:
    spec = plain(spec)
    if not isinstance(spec, Mapping):
        raise ConfigError(f"set {set_name!r}: candidate {index} must be an object {{name, wgsl, grid, ...}}, "
                          f"got {js_value(spec)}")
    unknown = sorted(set(spec) - _CANDIDATE_FIELDS)
    name = spec.get("name")
    where = f"set {set_name!r}: candidate {repr(name) if isinstance(name, str) and name else index}"
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
                                                               lambda answer, _w: tuple(plain(answer))),
        then=tuple(_candidate(stage, i, calls, set_name) for i, stage in enumerate(spec.get("then") or ())),
        scratch=_scratch(spec.get("scratch"), where, calls),
        layout=spec.get("layout", "auto"),
    )


def _scratch(spec: Any, where: str, calls: Calls) -> dict[str, Callable[[Args], int]]:
    """A candidate's ``scratch``: each WGSL name's size in bytes, a number or a function of the
    call (``Kernel.scratch``: the device makes the buffers, the app gives none)."""
    spec = plain(spec)
    if spec is None:
        return {}
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{where}: scratch must be an object {{wgslName: bytes or a function of the call}}, "
                          f"got {js_value(spec)}")
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
    size = plain(answer)
    if isinstance(size, float) and size.is_integer():
        size = int(size)
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ConfigError(f"{where} must be a whole number of bytes >= 0, got {js_value(size)}")
    return size


def _space(spec: Any, set_name: str, calls: Calls) -> list[Kernel]:
    spec = plain(spec)
    if not isinstance(spec, Mapping):
        raise ConfigError(f"set {set_name!r}: space must be an object {{source | render, params, default, grid}}")
    grid = _function(spec.get("grid"), f"set {set_name!r}: space.grid")
    render, constants, size = spec.get("render"), spec.get("constants"), spec.get("workgroupSize")
    restrict = spec.get("restrict")

    def js(fn: Any, shape: Callable[[Any], Any] = lambda value: value) -> Callable | None:
        return None if fn is None else (lambda point: shape(plain(_app(fn, calls.to_js(dict(point))))))

    return Space(
        spec.get("name", set_name),
        params={str(name): list(values) for name, values in dict(spec.get("params") or {}).items()},
        default=dict(spec.get("default") or {}),
        grid=lambda point, args: _grid(_app(grid, calls.to_js(dict(point)), calls.view(args)),
                                       f"set {set_name!r}: space.grid"),
        source=spec.get("source"),
        render=js(render, str),
        restrict=js(restrict, bool) or (),
        constants=js(constants, dict),
        workgroup_size=js(size, tuple) if callable(size) else (tuple(size) if size is not None else None),
        entry_point=spec.get("entryPoint", "main"),
        features=tuple(spec.get("features") or ()),
    ).candidates()


def _reference(fn: Any, calls: Calls, set_name: str) -> Callable:
    _function(fn, f"set {set_name!r}: reference")

    def reference(inputs: list[bytes], params: tuple) -> Sequence[Any]:
        view = calls.view(Args(tuple(_Sized(len(data)) for data in inputs), params))
        answer = _app(fn, view, calls.to_js([memoryview(data) for data in inputs]))
        # Each output as JavaScript gave it: ``to_py`` on the whole answer would make every typed
        # array a memoryview first, losing the name that says its element type (``_expected``).
        return [_expected(item) for item in (answer if _is_js_array(answer) else plain(answer))]

    return reference


# A typed array's element type, so that a Float32Array given for a u32 output is an error, not bytes
# read as something else (``expected.as_bytes``).
_TYPED_ARRAYS = {"Float32Array": "f", "Float64Array": "d", "Float16Array": "e", "Int32Array": "i",
                 "Uint32Array": "I", "Int16Array": "h", "Uint16Array": "H", "Int8Array": "b", "Uint8Array": "B"}


def _is_js_array(value: Any) -> bool:
    """Whether ``value`` is a JavaScript Array (a proxy whose items stay JavaScript values)."""
    return hasattr(value, "to_py") and str(getattr(getattr(value, "constructor", None), "name", "")) == "Array"


def _expected(item: Any) -> Any:
    """One output of a JavaScript reference: a typed array as :class:`~wgtune.tune.expected.TypedValues`
    of its element type, an ArrayBuffer or bytes as bytes, a plain array of numbers as it is."""
    typecode = _TYPED_ARRAYS.get(str(getattr(getattr(item, "constructor", None), "name", "")))
    value = plain(item)
    if typecode is not None:
        return TypedValues(typecode, bytes(value))
    if isinstance(value, (list, tuple)):
        return value
    return bytes(value)


class _Sized:
    """A stand-in buffer with a size, for the view a reference function receives."""

    def __init__(self, size: int) -> None:
        self.size = size


def tunable_set(spec: Any, to_js: Callable[[Any], Any] = lambda value: value) -> tuple[TunableSet, Calls]:
    """The set ``spec`` describes (see the module doc), and what its functions see of a call; a
    ConfigError that names the field when something is wrong."""
    spec = plain(spec)
    if not isinstance(spec, Mapping):
        raise ConfigError(f"defineSet takes an object {{name, candidates | space, key, ...}}, got {js_value(spec)}")
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"defineSet: name must be a non-empty string, got {js_value(name)}")
    unknown = sorted(set(spec) - _SET_FIELDS)
    if unknown:
        known = ", ".join(sorted(_SET_FIELDS))
        raise ConfigError(f"set {name!r}: unknown field(s) {', '.join(unknown)}; known: {known}")
    calls = Calls(to_js)
    if ("candidates" in spec) == ("space" in spec):
        raise ConfigError(f"set {name!r}: give candidates (a list) or space (one source and parameter lists)")
    if "space" in spec:
        candidates = _space(spec["space"], name, calls)
    else:
        listed = plain(spec["candidates"])
        if not isinstance(listed, (list, tuple)) or not listed:
            raise ConfigError(f"set {name!r}: candidates must be a non-empty array")
        candidates = [_candidate(candidate, index, calls, name) for index, candidate in enumerate(listed)]
    calls.names = param_names(candidates[0])
    key = spec.get("key")
    key_function = (_params_key(calls, param_scalars(candidates[0])) if key is None
                    else calls.function(key, f"set {name!r}: key", lambda answer, _where: plain(answer)))
    options = {option: plain(spec[js_name]) for option, js_name in
               (("output_type", "outputType"), ("atol", "atol"), ("rtol", "rtol")) if js_name in spec}
    for tolerance in ("atol", "rtol"):  # a function of the call's view, as the key is
        if callable(options.get(tolerance)):
            options[tolerance] = calls.function(spec[tolerance], f"set {name!r}: {tolerance}",
                                                lambda answer, _where: plain(answer))
    if spec.get("outputs") is not None:
        options["outputs"] = tuple(plain(spec["outputs"]))
    if spec.get("reference") is not None:
        options["reference"] = _reference(spec["reference"], calls, name)
    if spec.get("search") is not None:
        options["search"] = _search(plain(spec["search"]), name)
    return TunableSet(name, candidates, key=key_function, **options), calls


def _search(spec: Any, set_name: str) -> Search:
    if not isinstance(spec, Mapping):
        raise ConfigError(f"set {set_name!r}: search must be an object "
                          "{strategy, candidates, seconds, seed, options}")
    try:
        return Search(**dict(spec))
    except TypeError as error:
        known = "strategy, candidates, seconds, seed, options"
        raise ConfigError(f"set {set_name!r}: search: {error}; known: {known}") from None


def _params_key(calls: Calls, scalars: tuple[str | None, ...] | None) -> Callable[[Args], dict]:
    """The default key: the call's integer params (sizes), each rounded up to a power of two
    (``anchor``), by field name or position; float params (an ``f32`` field, a JavaScript
    fraction) are left out, so ``alpha: 2.0`` and ``alpha: 2.5`` share a winner. A key function
    says otherwise where a float matters."""

    def sized(value: Any, scalar: str | None) -> Any:
        if isinstance(value, tuple):
            items = [sized(item, scalar) for item in value]
            return None if any(item is None for item in items) else tuple(items)
        if scalar in ("f32", "f16") or (isinstance(value, float) and not value.is_integer()):
            return None
        value = int(value)
        return anchor(value) if value >= 0 else value

    def key(args: Args) -> dict:
        names = calls.names or tuple(f"p{index}" for index in range(len(args.params)))
        kinds = scalars or (None,) * len(names)
        fields = {name: sized(value, scalar) for name, scalar, value in zip(names, kinds, args.params, strict=False)}
        return {name: value for name, value in fields.items() if value is not None}

    return key
