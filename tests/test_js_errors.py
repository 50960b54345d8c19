"""wgtune's errors as the JavaScript API raises them (``backends/js_errors.py``): one line of JSON
with the error's name, whole message and fields, which ``web/errors.js`` makes a typed Error of
(e2e/test_js_first_hour.py checks that side in Chromium)."""

from __future__ import annotations

import asyncio
import json

import pytest

from wgtune.backends.js_errors import Facing, ForJavaScript, describe_error, js_value
from wgtune.errors import ConfigError, Launch, LaunchRefused, Mismatch, NoValidKernelFound, StoreError


def test_no_valid_kernel_found_gives_every_candidates_failure_and_says_compile_for_a_compiler_error():
    error = NoValidKernelFound("scale", "fallback", (
        Launch("wg64", "compile failed: error: expected ';' at 3:14"),
        Launch("wg128", "launch failed: out of memory"),
        Mismatch("wg256", "element 3 is 7.0, expected 6.0"),
    ))
    described = describe_error(error)
    assert described["name"] == "NoValidKernelFound" and described["set"] == "scale"
    assert described["message"] == str(error) and "\n" in described["message"]  # whole, every line
    assert described["failures"] == [
        {"candidate": "wg64", "reason": "Compile", "message": "compile failed: error: expected ';' at 3:14"},
        {"candidate": "wg128", "reason": "Launch", "message": "launch failed: out of memory"},
        {"candidate": "wg256", "reason": "Mismatch", "message": "element 3 is 7.0, expected 6.0"},
    ]


def test_a_config_error_names_its_field_and_a_subclass_takes_the_nearest_javascript_name():
    assert describe_error(ConfigError("n is wrong", field="n")) == {"name": "ConfigError", "message": "n is wrong",
                                                                   "field": "n"}
    assert describe_error(LaunchRefused("no STORAGE usage"))["name"] == "LaunchRefused"

    class Damaged(StoreError):
        pass

    assert describe_error(Damaged("bad document"))["name"] == "StoreError"


class Target:
    javascript_facing = True

    def sync(self, fail: bool) -> str:
        if fail:
            raise ConfigError("bad", field="x")
        return "ok"

    async def later(self) -> None:
        raise StoreError("damaged")

    def awaitable(self):
        return self.later()

    def child(self) -> Target:
        return Target()

    def bug(self) -> None:
        raise KeyError("not ours")


def test_facing_turns_wgtune_errors_into_one_json_line_and_leaves_other_exceptions_as_they_are():
    facing = Facing(Target())
    assert facing.sync(False) == "ok"
    with pytest.raises(ForJavaScript) as raised:
        facing.sync(True)
    (line,) = str(raised.value).splitlines()
    assert json.loads(line) == {"name": "ConfigError", "message": "bad", "field": "x"}
    for call in (facing.later, facing.awaitable):
        with pytest.raises(ForJavaScript, match='"name": "StoreError"'):
            asyncio.run(call())
    assert isinstance(facing.child(), Facing)  # a handle it answers is JavaScript-facing too
    with pytest.raises(KeyError):
        facing.bug()
    with pytest.raises(ConfigError):  # Python callers of the object itself get wgtune's own exceptions
        Target().sync(True)


@pytest.mark.parametrize("value, text", [
    (None, "null"), (True, "true"), (1.5, "1.5"), (2.0, "2"), (float("nan"), "NaN"), ("n=1", '"n=1"'),
    ([1, 2], "[1, 2]"), ([float("nan"), float("inf")], "[NaN, Infinity]"), ({"n": 1}, '{"n": 1}'),
    (list(range(100)), "an array"), (len, "a function"),
])
def test_values_are_named_as_javascript_names_them(value, text):
    assert js_value(value) == text
