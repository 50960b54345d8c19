"""wgtune's errors as the JavaScript API raises them: a name, the whole message, structured fields.

What a page calls in Python (``PageSession``, ``JsSet``) is wrapped by :func:`for_javascript`:
a :class:`~wgtune.errors.WgtuneError` leaves it as :class:`ForJavaScript`, whose message is one
line of JSON (:func:`describe_error`); ``web/errors.js`` reads that line back and throws the
``Error`` subclass of the same name (``NoValidKernelFound``, ``ConfigError``, ...) with its
fields. Pyodide would otherwise hand JavaScript a ``PythonError`` whose message is the whole
traceback, and whose useful part is only the exception's last line.

An exception one of the app's own functions raised (a set's ``grid`` or ``key``, marked by
:func:`thrown_by_app` where ``js_set_spec.py`` calls them) goes back as it was thrown: its
:class:`ForJavaScript` line carries a token instead (``"thrown"``), which ``web/sets.js`` trades
for the app's own error with :func:`take_thrown`. Raising the app's exception itself would not
do: Pyodide (314.0) rejects an async call's promise with a ``PythonError`` of type ``JsException``,
not with the error the app's function threw (tried on 2026-12-06: ``e2e/test_js_call_errors.py``
got "internal error: JsException: MyError: my grid broke").

Messages are written for a JavaScript reader: :func:`js_value` describes a value as JavaScript
would name it (``null``, ``1.5``, ``"text"``, ``an array``), never as Python's
``repr`` (``jsnull``, ``None``, ``'text'``).

Pure Python: imports in CPython (where it is tested) and in Pyodide.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import math
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from wgtune import errors
from wgtune.errors import WgtuneError
from wgtune.key import Key

__all__ = ["Facing", "ForJavaScript", "concerning", "describe_error", "failed_answer", "for_javascript", "js_value",
           "take_thrown", "thrown_by_app"]

# The error types JavaScript has a class for (web/errors.js); any other wgtune error is a WgtuneError there.
JS_ERROR_NAMES = ("ConfigError", "LaunchRefused", "KernelError", "StoreError", "TuneFailed", "DeviceLost",
                  "NoValidKernelFound", "WgtuneError")

F = TypeVar("F", bound=Callable[..., Any])


class ForJavaScript(Exception):
    """A wgtune error on its way to JavaScript: its message is :func:`describe_error` as one line
    of JSON (``web/errors.js`` parses it)."""


KEPT_THROWN = 32
"""Exceptions of the app's own functions kept for JavaScript to take (:func:`take_thrown`): those a
tune met (a candidate's grid failing) are its failures, never taken, and must not pile up."""

_thrown: OrderedDict[int, BaseException] = OrderedDict()  # by id, most recent last


def thrown_by_app(error: BaseException) -> BaseException:
    """Mark ``error`` as raised by one of the app's own functions (a JavaScript function of a set's,
    ``js_set_spec.py``); answers it. Where it ends a call from JavaScript, even as the cause of a
    wgtune error (a key function's failure), the caller gets it back as it was thrown."""
    _thrown[id(error)] = error
    _thrown.move_to_end(id(error))
    while len(_thrown) > KEPT_THROWN:
        _thrown.popitem(last=False)
    return error


def take_thrown(token: int) -> Any:
    """What the app's function threw, for ``web/sets.js`` to throw again: the JavaScript error
    itself (a ``JsException``'s ``js_error``), or None where it is no longer kept."""
    error = _thrown.pop(token, None)
    return None if error is None else getattr(error, "js_error", error)


def _app_thrown(error: BaseException) -> int | None:
    """The token of the app's own exception that ``error`` is, or was raised from (its causes)."""
    seen: BaseException | None = error
    while seen is not None:
        if _thrown.get(id(seen)) is seen:
            return id(seen)
        seen = seen.__cause__
    return None


def _for_javascript(error: Exception) -> ForJavaScript | None:
    """``error`` as it goes to JavaScript: the app's own (a token to take it by), a wgtune error
    (described), or None for anything else (a bug of wgtune's: Pyodide's PythonError says what)."""
    token = _app_thrown(error)
    if token is not None:
        return ForJavaScript(json.dumps({"name": "WgtuneError", "message": str(error), "thrown": token}))
    if isinstance(error, WgtuneError):
        return ForJavaScript(json.dumps(describe_error(error)))
    return None


def describe_error(error: BaseException) -> dict[str, Any]:
    """``error`` as the fields of its JavaScript error: ``name`` (its class, or the nearest one
    JavaScript has), ``message`` (whole), and where known ``set``, ``key``, ``field`` and, for
    NoValidKernelFound, ``failures`` (each candidate's ``{candidate, reason, message}``)."""
    name = next((cls.__name__ for cls in type(error).__mro__ if cls.__name__ in JS_ERROR_NAMES), "WgtuneError")
    described: dict[str, Any] = {"name": name, "message": str(error)}
    if not isinstance(error, WgtuneError):  # a bug of wgtune's: say what it was, once
        described["message"] = f"internal error: {type(error).__name__}: {error}"
    if isinstance(error, errors.NoValidKernelFound):
        described["failures"] = [failure_of(candidate) for candidate in error.errors]
    if getattr(error, "set_name", None) is not None:
        described["set"] = error.set_name
    if getattr(error, "key", None) is not None:
        described["key"] = _key(error.key)
    if getattr(error, "field", None) is not None:
        described["field"] = error.field
    return described


class concerning:  # lower case: a context manager read as a clause, ``with concerning(key):``
    """A wgtune error raised in the block that names no key (a call's LaunchRefused, a settle's
    timeout, a NoValidKernelFound of the set's fallback) is given ``key``, the one key the block's
    call concerns, and ``set_name`` where it names no set: JavaScript's ``key`` and ``set``. Use it
    only once the call's key is known: an error before (a bad param, the app's key function
    failing) concerns no key, and names none. A class, not a generator: it wraps every call's
    launch, and here it cost 0.4 us a use against 1.5 us for a ``contextlib.contextmanager``."""

    __slots__ = ("key", "set_name")

    def __init__(self, key: Any, set_name: str | None = None) -> None:
        self.key, self.set_name = key, set_name

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: Any) -> bool:
        if isinstance(error, WgtuneError):
            if getattr(error, "key", None) is None:
                error.key = self.key
            if self.set_name is not None and getattr(error, "set_name", None) is None:
                error.set_name = self.set_name
        return False  # raised on, named


def failed_answer(state: object, failure: BaseException) -> dict[str, Any]:
    """What a key's answer says of its last tune's ``failure``: ``failure`` (described), and the
    state ``Failed`` where every candidate failed and the key is not decided otherwise since
    (``TuneCache.claim`` raises it again rather than tune)."""
    answer: dict[str, Any] = {"failure": describe_error(failure)}
    if isinstance(failure, errors.NoValidKernelFound) and type(state).__name__ == "Miss":
        answer["state"] = "Failed"
    return answer


def failure_of(candidate: errors.CandidateError) -> dict[str, str]:
    """One candidate's failure as JavaScript gets it: a compile failure says ``Compile`` (its
    message is the WGSL compiler's), a launch one ``Launch``; the others their kind."""
    reason = type(candidate).__name__
    if isinstance(candidate, errors.Launch) and candidate.reason.startswith("compile"):
        reason = "Compile"
    return {"candidate": candidate.name, "reason": reason, "message": candidate.reason}


def _key(key: Any) -> Any:
    """A key as JavaScript gets it: a Key's fields as an object; a label as it is."""
    if isinstance(key, (Key, Mapping)):
        return {str(name): value for name, value in dict(key).items()}
    return str(key)


def for_javascript(method: F, set_name: str | None = None) -> F:
    """``method`` (sync or async) with each wgtune error it raises, and each exception of the app's
    own functions (:func:`thrown_by_app`), turned into :class:`ForJavaScript`. Others pass as they
    are: cancellations, and wgtune's bugs. ``set_name``: the set a handle's methods concern, given
    to an error that names none (its JavaScript ``set``).
    """
    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def call_async(*args: Any, **kwargs: Any) -> Any:
            with _translated(set_name):
                return await method(*args, **kwargs)

        return call_async  # type: ignore[return-value]

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with _translated(set_name):
            answer = method(*args, **kwargs)
        if inspect.isawaitable(answer):  # a method that answers later (a first launch's verdict)
            return _awaited(answer, set_name)
        return answer

    return call  # type: ignore[return-value]


class Facing:
    """``target`` as JavaScript calls it: each public method with :func:`for_javascript` around it
    (wgtune errors become :class:`ForJavaScript`), and an answer that is itself JavaScript-facing
    (a class with ``javascript_facing = True``: a set's handle) wrapped the same way. Python
    callers use ``target`` itself and get wgtune's own exceptions."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name.startswith("_") or not callable(value):
            return value
        wrapped = for_javascript(value, getattr(self._target, "javascript_set_name", None))
        if inspect.iscoroutinefunction(value):

            async def call(*args: Any, **kwargs: Any) -> Any:
                return _facing(await wrapped(*args, **kwargs))

        else:

            def call(*args: Any, **kwargs: Any) -> Any:
                return _facing(wrapped(*args, **kwargs))

        if inspect.ismethod(value) and value.__self__ is self._target:
            self.__dict__[name] = call  # made once: a call on the hot path finds it without __getattr__
        return call


def _facing(answer: Any) -> Any:
    return Facing(answer) if getattr(answer, "javascript_facing", False) else answer


async def _awaited(answer: Any, set_name: str | None = None) -> Any:
    with _translated(set_name):
        return await answer


@contextlib.contextmanager
def _translated(set_name: str | None = None) -> Iterator[None]:
    """Turn an exception raised in the block into what JavaScript gets (:func:`_for_javascript`);
    anything that has no JavaScript form (a bug of wgtune's, a cancellation) passes as raised. A
    wgtune error that names no set gets ``set_name``."""
    try:
        yield
    except Exception as error:
        if set_name is not None and isinstance(error, WgtuneError) and getattr(error, "set_name", None) is None:
            error.set_name = set_name
        translated = _for_javascript(error)
        if translated is None:
            raise
        raise translated from None


def js_value(value: Any) -> str:
    """``value`` (as Pyodide converts a JavaScript value) named as JavaScript would: ``null``,
    ``true``, ``1.5``, ``"text"``, ``an array``, ``an object``, ``a function``."""
    # Pyodide gives JavaScript's null as jsnull or None, undefined as None: both read "null" here.
    if value is None or type(value).__name__ in ("JsNull", "jsnull") or repr(value) == "jsnull":
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)) and all(item is None or isinstance(item, (bool, int, float, str))
                                                for item in value[:16]):
        text = "[" + ", ".join(js_value(item) for item in value[:16]) + "]"  # NaN as NaN: JSON has none
        if len(value) <= 16 and len(text) <= 60:
            return text
    if isinstance(value, (list, tuple, Mapping)):
        try:  # short plain data as JavaScript writes it; anything else by its kind
            text = json.dumps(value if isinstance(value, Mapping) else list(value), allow_nan=False)
        except (TypeError, ValueError):
            text = ""
        if text and len(text) <= 60:
            return text
        return "an object" if isinstance(value, Mapping) else "an array"
    if callable(value):
        return "a function"
    constructor = str(getattr(getattr(value, "constructor", None), "name", "") or "")
    if constructor == "Array":
        return "an array"
    return f"a {constructor}" if constructor else "an object"
