"""The child process of :class:`~wgtune.backends.isolation.ChildLaunchGuard`: first launches,
where a kernel that never returns can be killed.

Run as ``python -m wgtune.backends.isolated_worker``. It opens the default adapter's device,
answers ``("ready", identity)`` and then reads pickled requests from standard input, answering
each on the standard output it was started with (anything else that prints goes to standard
error):

- ``("buffers", [bytes, ...])``: the benchmark's buffers, as the parent read them; kept for the
  launches that follow;
- ``("launch", LaunchSpec)``: compile the candidate (answers ``("compiled",)``), launch it once on
  those buffers and wait for it (answers ``("done", seconds)``), or ``("error", message)`` when
  compiling or launching failed.

The parent kills the process when a launch runs past the time limit; nothing here watches time.
"""

from __future__ import annotations

import os
import pickle
import sys
import time
from dataclasses import dataclass
from typing import BinaryIO

__all__ = ["LaunchSpec", "StageSpec", "main"]


@dataclass(frozen=True)
class StageSpec:
    """One stage of a candidate as the child rebuilds it: its code, and its grid and own params
    as the parent computed them on the call."""

    name: str
    wgsl: str
    entry_point: str
    constants: dict
    features: tuple[str, ...]
    grid: tuple[int, int, int]
    params: tuple | None
    runtime_checks: bool = True


@dataclass(frozen=True)
class LaunchSpec:
    """A candidate's stages, the call's buffer names and params (the buffers were sent before),
    and the sizes of the candidate's scratch buffers on the call."""

    stages: tuple[StageSpec, ...]
    names: tuple | None
    params: tuple
    scratch: dict


def _kernel(launch: LaunchSpec):
    from wgtune.sets.kernel import Kernel

    def rebuilt(stage: StageSpec, then: tuple = (), scratch: dict | None = None) -> Kernel:
        params = None if stage.params is None else (lambda _args, values=stage.params: values)
        return Kernel(stage.name, stage.wgsl, grid=lambda _args, grid=stage.grid: grid,
                      entry_point=stage.entry_point, constants=stage.constants, features=stage.features,
                      then=then, params=params, scratch=scratch or {}, runtime_checks=stage.runtime_checks)

    scratch = {name: (lambda _args, size=size: size) for name, size in launch.scratch.items()}
    stages = launch.stages
    return rebuilt(stages[0], tuple(rebuilt(stage) for stage in stages[1:]), scratch)


def _answer(out: BinaryIO, message: tuple) -> None:
    pickle.dump(message, out, protocol=pickle.HIGHEST_PROTOCOL)
    out.flush()


def main() -> int:
    # The answers get a descriptor of their own: whatever a driver prints goes to standard error.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    requests = sys.stdin.buffer

    from wgtune.backends.native import NativeDevice
    from wgtune.runner import run_inline
    from wgtune.sets.args import Args

    device = NativeDevice.open()
    _answer(out, ("ready", device.identity.as_dict()))
    buffers: list = []
    while True:
        try:
            kind, payload = pickle.load(requests)
        except EOFError:
            return 0
        if kind == "buffers":
            buffers = [device.create_buffer(data) for data in payload]
            continue
        try:
            kernel = _kernel(payload)
            compiled = run_inline(device.compile(kernel))
            _answer(out, ("compiled",))
            args = Args(tuple(buffers), payload.params, names=payload.names)
            started = time.perf_counter()
            device.dispatch(compiled, args, payload.stages[0].grid)
            run_inline(device.sync())
            _answer(out, ("done", time.perf_counter() - started))
        except Exception as error:  # the parent turns it into the candidate's failure
            _answer(out, ("error", f"{type(error).__name__}: {error}"))


if __name__ == "__main__":
    sys.exit(main())
