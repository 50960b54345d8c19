"""A call's launches on the WebGPU device algorithm (``backends/call_launches.py``) where WebGPU
reports errors later, as in a browser: on a fake shim whose error scopes answer what the test
says. The first launch of a call runs in its own scope, whose refusal its caller gets (and no
``sync``); a refusal of a later launch sends the call back to a checked first launch; a scope no
caller takes is reported to ``sync`` as before."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest
from test_webgpu_device import Buffer, RecordingShim

from wgtune import Args, Kernel, KernelError, LaunchRefused, run_inline
from wgtune.backends.call_launches import CALL_NAME
from wgtune.backends.webgpu import WebGPUDevice

WGSL = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main() { out[0] = x[0]; }  // each binding used: one a source never mentions is left unbound
"""


class Closed:
    """What a browser's ``submit_launch`` answers (a promise that resolves once its scope closed):
    closed already when awaited here, as the tests close the scopes by hand first."""

    def __await__(self):
        return iter(())


class ScopedShim(RecordingShim):
    """A GPU that says later what it refused: each call scope answers the next of ``verdicts``
    (None: nothing wrong); launches after a call's first go through ``submit_launch``, whose
    verdicts the test hands over with :meth:`close_launch_scopes`."""

    def __init__(self, verdicts=()) -> None:
        super().__init__()
        self.verdicts = deque(verdicts)
        self.reported: list[Any] = []
        self.owners: list[Any] = []
        self.on_launch_refused = None

    def begin_call_scope(self) -> None:
        self._call("begin_call_scope")

    def end_call_scope(self) -> tuple[str, str | None]:
        self._call("end_call_scope")
        return ("scope", self.verdicts.popleft() if self.verdicts else None)  # a browser's: a promise

    async def scope_error(self, scope: Any) -> str | None:
        return scope[1]

    def report_scope(self, scope: Any) -> None:
        self.reported.append(scope[1])

    def submit_launch(self, encoder, owner) -> Closed:
        self.submit(encoder)
        self.owners.append(owner)
        return Closed()

    def close_launch_scopes(self, *errors: str | None) -> None:
        for owner, error in zip(self.owners, errors, strict=True):
            if error is not None:
                self.on_launch_refused(owner, error)
        self.owners.clear()


def setup(verdicts=()) -> tuple[ScopedShim, WebGPUDevice, Any, Args]:
    shim = ScopedShim(verdicts)
    device = WebGPUDevice(shim, timestamps=False)
    pipeline = run_inline(device.compile(Kernel("k", WGSL, grid=lambda args: (1, 1, 1))))
    args = Args({"x": device.create_buffer(size=64), "out": device.create_buffer(size=64)})
    return shim, device, pipeline, args


def test_a_first_launch_that_webgpu_refuses_later_is_the_callers_launch_refused_with_its_bindings():
    shim, device, pipeline, args = setup(["[Buffer] used in submit while destroyed.\n - While calling Submit"])
    device.launch(pipeline, args, (1, 1, 1))
    assert shim.names().count("submit") == 1  # the launch went out, inside its scope
    scope = device.take_launch_scope(args)
    with pytest.raises(LaunchRefused) as refused:
        run_inline(scope)
    assert str(refused.value) == ("WebGPU refused candidate 'k' on this call ('x' at @group(0) @binding(0), 'out' at "
                                  "@group(0) @binding(1)): [Buffer] used in submit while destroyed. - While calling "
                                  "Submit")
    assert pipeline not in args.cache  # its next launch is a first one again, checked and scoped anew
    run_inline(device.sync())  # nothing of it left for a tune
    assert shim.reported == []


def test_a_first_launch_webgpu_took_resolves_and_the_next_launches_are_not_scoped():
    shim, device, pipeline, args = setup([None])
    device.launch(pipeline, args, (1, 1, 1))
    run_inline(device.take_launch_scope(args))
    for _ in range(3):
        device.launch(pipeline, args, (1, 1, 1))
        assert device.take_launch_scope(args) is None
    assert shim.names().count("begin_call_scope") == 1 and shim.names().count("submit") == 4


def test_a_later_launch_webgpu_refuses_sends_its_call_back_to_a_checked_first_launch_not_to_sync():
    shim, device, pipeline, args = setup([None, None, "destroyed"])
    other = Args({"x": device.create_buffer(size=64), "out": device.create_buffer(size=64)})
    for call in (args, other):
        device.launch(pipeline, call, (1, 1, 1))
        run_inline(device.take_launch_scope(call))
    device.launch(pipeline, args, (1, 1, 1))
    device.launch(pipeline, other, (1, 1, 1))
    shim.close_launch_scopes("[Buffer] used in submit while destroyed.", None)
    assert pipeline not in args.cache and pipeline in other.cache  # only the call it refused
    device.launch(pipeline, args, (1, 1, 1))  # a first launch again: scoped, its refusal the caller's
    with pytest.raises(LaunchRefused, match="destroyed"):
        run_inline(device.take_launch_scope(args))
    run_inline(device.sync())
    assert shim.reported == []


def test_a_scope_no_caller_takes_goes_to_the_next_sync_as_every_error_did():
    shim, device, pipeline, args = setup(["refused"])
    device.launch(pipeline, args, (1, 1, 1))  # run by a caller that does not take its scope
    assert device.take_launch_scope(Args((Buffer(64, 128),))) is None  # another call's: not this one's
    run_inline(device.sync())
    assert shim.reported == ["refused"]


def test_a_call_refused_before_the_launch_submits_nothing_and_stays_refused():
    shim, device, pipeline, _ = setup()
    lacking = Args({"x": device.create_buffer(size=64), "out": Buffer(64, shim.COPY_SRC)})
    for _ in range(2):
        with pytest.raises(LaunchRefused, match=r"binding 1 'out' .* lacks STORAGE usage"):
            device.launch(pipeline, lacking, (1, 1, 1))
    assert "submit" not in shim.names() and device.take_launch_scope(lacking) is None
    with pytest.raises(LaunchRefused, match=r"exceeds a device limit: dispatch of \(70000, 1, 1\)"):
        device.launch(pipeline, Args({"x": Buffer(64, shim.STORAGE), "out": Buffer(64, shim.STORAGE)}),
                      (70000, 1, 1))


def test_in_a_batch_a_first_launch_binds_in_its_scope_and_is_recorded_not_submitted():
    shim, device, pipeline, args = setup([None])
    device.begin_batch()
    device.launch(pipeline, args, (1, 1, 1))
    device.launch(pipeline, args, (1, 1, 1))
    assert "submit" not in shim.names() and shim.names().count("begin_call_scope") == 1
    device.end_batch()
    assert shim.names().count("submit") == 1
    assert [command[0] for command in shim.passes[-1]] == ["set_pipeline", "set_bind_group", "dispatch_workgroups",
                                                           "dispatch_workgroups", "end"]


def test_a_native_error_at_the_call_is_launch_refused():
    shim, device, pipeline, args = setup()
    shim.fail = "submit"
    with pytest.raises(LaunchRefused, match=r"WebGPU refused candidate 'k' on this call .*: driver says no") as refused:
        device.launch(pipeline, args, (1, 1, 1))
    assert isinstance(refused.value, KernelError)


def test_a_batch_submission_webgpu_refuses_is_the_batchs_error_naming_its_calls_whose_next_launch_is_checked():
    shim, device, pipeline, args = setup([None, None])
    other = Args({"x": device.create_buffer(size=64), "out": device.create_buffer(size=64)})
    for call, name in ((args, "set 'inc' [n=16]"), (other, "set 'inc' [n=16]")):
        device.launch(pipeline, call, (1, 1, 1))
        run_inline(device.take_launch_scope(call))
        call.cache[CALL_NAME] = name  # as js_sets names its calls
    device.begin_batch()
    device.launch(pipeline, args, (1, 1, 1))
    device.launch(pipeline, other, (1, 1, 1))  # its buffer destroyed before the submit, say
    device.end_batch()
    verdict = device.take_batch_verdict()
    assert device.take_batch_verdict() is None  # the batch's alone
    shim.close_launch_scopes("[Buffer] used in submit while destroyed.")
    with pytest.raises(LaunchRefused) as refused:
        run_inline(verdict)
    assert str(refused.value) == ("WebGPU refused a batch's submission of 2 launches, so none of them ran: "
                                  "set 'inc' [n=16] (2 calls): [Buffer] used in submit while destroyed.")
    assert pipeline not in args.cache and pipeline not in other.cache  # each one's next launch: a first one
    device.launch(pipeline, args, (1, 1, 1))  # scoped again: the call on a live buffer runs
    assert shim.names().count("begin_call_scope") == 3
    run_inline(device.take_launch_scope(args))
    run_inline(device.sync())
    assert shim.reported == []  # nothing of it for a tune


def test_a_batch_webgpu_took_resolves_and_a_batch_inside_another_leaves_the_word_to_the_outer_one():
    shim, device, pipeline, args = setup([None])
    device.launch(pipeline, args, (1, 1, 1))
    run_inline(device.take_launch_scope(args))
    device.begin_batch()
    device.begin_batch()
    device.launch(pipeline, args, (1, 1, 1))
    device.end_batch()
    assert device.take_batch_verdict() is None  # inner: nothing submitted yet
    device.end_batch()
    verdict = device.take_batch_verdict()
    shim.close_launch_scopes(None)
    assert run_inline(verdict) is None and pipeline in args.cache


def test_a_batch_refusal_nobody_takes_is_warned_of_and_still_sends_its_calls_back_to_a_first_launch(caplog):
    shim, device, pipeline, args = setup([None])
    device.launch(pipeline, args, (1, 1, 1))
    run_inline(device.take_launch_scope(args))
    device.begin_batch()
    device.launch(pipeline, args, (1, 1, 1))
    device.end_batch()
    shim.close_launch_scopes("destroyed")
    assert pipeline not in args.cache
    assert "WebGPU refused a batch's submission of 1 launch, so none of them ran: candidate 'k'" in caplog.text
