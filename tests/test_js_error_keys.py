"""The key a JavaScript error names (``key``: the key's fields), natively on the fake device: a call's
error once its key is known names it; an error that concerns no one key (a set's definition, a call
refused before its key is known) names none. e2e/test_js_call_errors.py checks the same in Chromium."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from fakes import FakeDevice
from test_js_sets import Session, scale_kernel, spec

from wgtune import Args, Kernel, LaunchRefused
from wgtune.backends.js_errors import Facing, ForJavaScript, concerning, describe_error
from wgtune.backends.js_sets import define_set
from wgtune.errors import ConfigError, NoValidKernelFound, StoreError


class RefusingDevice(FakeDevice):
    """A fake device that refuses, as WebGPU would, a call whose buffer ``y`` is ``refused``."""

    refused: object = None

    def check_call(self, kernel: Kernel, args: Args) -> None:
        if self.refused is not None and any(buffer is self.refused for buffer in args.buffers):
            raise LaunchRefused("binding 1 'y': the buffer lacks STORAGE usage")


def described(call: Callable[[], Any]) -> dict:
    """What JavaScript gets of the error ``call`` raises (awaited, where it answers an awaitable)."""
    with pytest.raises(ForJavaScript) as raised:
        answer = call()
        if asyncio.iscoroutine(answer):
            asyncio.run(answer)
    return json.loads(str(raised.value))


def test_a_refused_call_and_a_set_without_fallback_name_the_calls_key_and_a_definition_names_none():
    device = RefusingDevice()
    for name in ("wg32", "wg64"):
        device.script(name, duration=1e-3, kernel=scale_kernel)
    session = Session(device)
    js_set = Facing(define_set(session, spec()[0]))
    x, y = device.buffer([1.0, 2.0]), device.buffer([0.0, 0.0])
    device.refused = y
    call = {"buffers": {"x": x, "y": y}, "params": {"n": 2, "scale": 1}}
    for method in (js_set.check, js_set.execute):
        error = described(lambda method=method: method(call))
        assert error["name"] == "LaunchRefused" and error["set"] == "scale", error
        assert error["key"] == {"n": 2}, error  # the key's fields, as answers give them
    bad_param = described(lambda: js_set.execute({**call, "params": {"n": 1.5, "scale": 1}}))
    assert bad_param["name"] == "ConfigError" and "key" not in bad_param  # refused before its key is known

    broken = RefusingDevice()
    for name in ("wg32", "wg64"):
        broken.script(name, compile_error="unable to parse")
    broken_set = Facing(define_set(Session(broken), spec()[0]))
    definition = described(broken_set.prepare)
    assert definition["name"] == "NoValidKernelFound" and "key" not in definition, definition  # of no one key
    assert "no valid kernel found for scale [fallback]:" in definition["message"]
    call = {"buffers": {"x": broken.buffer([1.0]), "y": broken.buffer([0.0])}, "params": {"n": 1, "scale": 1}}
    executed = described(lambda: broken_set.execute(call))  # nothing to run for this call
    assert executed["name"] == "NoValidKernelFound" and executed["key"] == {"n": 1}, executed


def test_concerning_gives_a_key_only_to_a_wgtune_error_that_names_none():
    named = NoValidKernelFound("scale", {"n": 4}, ())
    for error, key in ((LaunchRefused("refused"), {"n": 2}), (named, {"n": 4}), (StoreError("bad"), {"n": 2})):
        with pytest.raises(type(error)), concerning({"n": 2}, "scale"):
            raise error
        assert describe_error(error)["key"] == key and describe_error(error)["set"] == "scale"
    with pytest.raises(KeyError), concerning({"n": 2}):  # not wgtune's: as raised
        raise KeyError("bug")
    assert "key" not in describe_error(ConfigError("bad setting"))
