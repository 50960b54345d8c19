"""The tuning process: a device of its own, doing what its parent's :class:`RemoteDevice` asks.

Started by :class:`~wgtune.backends.worker_link.WorkerLink` as ``python -c`` calling :func:`main` (not
``-m``, which would make this module ``__main__``, whose classes the parent could not unpickle).
A tune's launches run here, where a kernel that never returns can be killed with its process;
nothing here watches time (the parent does, ``launch_ledger.py``).

The protocol, pickled both ways (requests on standard input, answers on the standard output it
was started with; whatever a driver prints goes to standard error):

- first ``("open", OpenSpec)``: open the parent's adapter (by its index, else the one whose
  identity matches, else the default one) and answer ``("ready", DeviceInfo)``;
- then ``(prelude, op, payload)``: ``prelude`` declares what the op refers to (kernels as
  :class:`KernelSpec`, a call's buffers and params, the values a candidate's functions gave on
  a call) and frees what the parent dropped; ``op`` is one :class:`~wgtune.gpu.device.Device`
  call on objects named by numbers the parent chose. Each answers ``("ok", value)`` or
  ``("error", kind, message, reason)``. A buffer's data may come as a ``Shared``: a memory file
  passed over the socket beside the pipe (``worker_link.py``), mapped here and written to the GPU.

A candidate's grid, params and scratch sizes are functions of the call, which cannot cross a
process: the parent evaluates them per call and sends the values; the kernels rebuilt here read
them back from the call's ``cache`` (:func:`rebuilt`).
"""

from __future__ import annotations

import builtins
import contextlib
import mmap
import os
import pickle
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import astuple, dataclass
from typing import Any, BinaryIO

from .worker_link import SOCKET_VARIABLE, Shared, receive_shared

__all__ = ["DeviceInfo", "KernelSpec", "OpenSpec", "RaisedBy", "error_answer", "main", "rebuilt", "relayed",
           "values_key"]

# How often the process checks that its parent is still there (a parent killed outright cannot
# kill it, and a runaway kernel would otherwise run on, orphaned).
PARENT_CHECK_SECONDS = 0.5


@dataclass(frozen=True)
class OpenSpec:
    """Which adapter to open: the parent's index among ``native_adapters.indexed_adapters()`` where it
    has one, else the adapter whose identity is ``identity`` (a dict of ``DeviceIdentity``), else
    the default adapter for ``power_preference``; with timestamps where the parent times with them."""

    adapter_index: int | None
    identity: dict | None
    power_preference: str = "high-performance"
    timestamps: bool = True
    api: str = "wgpu"
    """``"wgpu"`` (wgpu-native) or ``"dawn"``: the implementation the parent's device is on."""
    runtime_checks: bool = True
    """False: a Dawn device opened without its robustness (``DawnDevice.open(runtime_checks=False)``)."""


@dataclass(frozen=True)
class DeviceInfo:
    """The opened device as the parent's proxy presents it."""

    identity: dict
    timing: str
    background_compiles: int
    compile_width: int
    idle_clocks: bool = False


@dataclass(frozen=True)
class KernelSpec:
    """A candidate's stages as this process rebuilds them: everything but its functions, and
    which of them it has (their values come per call: :func:`values_key`)."""

    name: str
    wgsl: str
    entry_point: str
    constants: dict
    features: tuple[str, ...]
    workgroup_size: tuple | None
    workgroup_storage: int | None
    runtime_checks: bool
    has_params: bool
    scratch: tuple[str, ...]
    then: tuple[KernelSpec, ...] = ()
    layout: str = "auto"


@dataclass(frozen=True)
class RaisedBy:
    """What a candidate's function raised in the parent, raised again where it is called here."""

    kind: str
    message: str


def values_key(kernel_id: int) -> tuple:
    """Where a call's ``cache`` holds the values candidate ``kernel_id``'s functions gave on it:
    ``(grids, params, scratch)``, a grid and params per stage, scratch sizes by name."""
    return ("wgtune-remote", kernel_id)


def rebuilt(kernel_id: int, spec: KernelSpec) -> Any:
    """The candidate of ``spec`` as a Kernel whose functions read the values sent for the call."""
    from wgtune.sets.kernel import Kernel

    slot = values_key(kernel_id)

    def stage(index: int, part: KernelSpec, then: tuple = (), scratch: dict | None = None) -> Kernel:
        params = (lambda args: args.cache[slot][1][index]) if part.has_params else None
        return Kernel(part.name, part.wgsl, grid=lambda args: args.cache[slot][0][index],
                      workgroup_size=part.workgroup_size, workgroup_storage=part.workgroup_storage,
                      entry_point=part.entry_point, constants=part.constants, features=part.features,
                      then=then, params=params, scratch=scratch or {}, runtime_checks=part.runtime_checks,
                      layout=part.layout)

    def size(name: str) -> Callable:
        def scratch_size(args: Any) -> int:
            value = args.cache[slot][2][name]
            if isinstance(value, RaisedBy):  # the parent's size function raised: the same error here
                raise relayed(value.kind, value.message)
            return value
        return scratch_size

    then = tuple(stage(index, part) for index, part in enumerate(spec.then, start=1))
    return stage(0, spec, then, {name: size(name) for name in spec.scratch})


_RELAYED: dict[str, type] = {}


def relayed(kind: str, message: str) -> Exception:
    """An exception that reads as ``kind: message`` wherever it is shown: the builtin of that
    name, else a class made with that name."""
    cls = getattr(builtins, kind, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = _RELAYED.setdefault(kind, type(kind, (Exception,), {}))
    try:
        return cls(message)
    except Exception:  # a builtin that takes other arguments
        return _RELAYED.setdefault(kind, type(kind, (Exception,), {}))(message)


def error_answer(error: BaseException) -> tuple:
    """``("error", kind, message, reason)``: what the parent raises again (``DeviceLost`` keeps its reason)."""
    return ("error", type(error).__name__, str(error), getattr(error, "reason", None))


class Worker:
    """This process's device and the objects the parent named (see the module doc)."""

    def __init__(self, device: Any, shared: socket.socket | None = None) -> None:
        """``shared``: the socket the parent passes memory files over (``worker_link.Shared``)."""
        self.device = device
        self.shared = shared
        self.kernels: dict[int, Any] = {}
        self.buffers: dict[int, Any] = {}
        self.args: dict[int, Any] = {}
        self.compiled: dict[int, Any] = {}
        self.profiles: dict[int, Any] = {}

    def declare(self, item: tuple) -> None:
        from wgtune.sets.args import Args

        kind, number, *rest = item
        if kind == "kernel":
            self.kernels[number] = rebuilt(number, rest[0])
        elif kind == "args":
            buffers, params, names = rest
            self.args[number] = Args(tuple(self.buffers[b] for b in buffers), params, names=names)
        elif kind == "values":
            kernel, values = rest
            self.args[number].cache[values_key(kernel)] = values
        elif kind == "free":
            table = {"buffer": self.buffers, "args": self.args, "compiled": self.compiled, "profile": self.profiles}
            table[rest[0]].pop(number, None)

    def run(self, op: str, payload: tuple) -> Any:
        from wgtune.runner import run_inline

        device = self.device
        if op == "create":
            number, data, size, usage = payload  # data: bytes, None, or a mapped memory file (take_shared)
            buffer = self.buffers[number] = self._create(data, size, usage)
            return buffer.size, int(buffer.usage)
        if op == "clone":
            number, source = payload
            buffer = self.buffers[number] = device.clone_buffer(self.buffers[source])
            return buffer.size, int(buffer.usage)
        if op == "copy":
            device.copy_buffer(self.buffers[payload[0]], self.buffers[payload[1]])
        elif op == "read":
            return run_inline(device.read_buffer(self.buffers[payload[0]]))
        elif op == "compare":
            got, want, *rest = payload
            return astuple(run_inline(device.compare_buffers(self.buffers[got], self.buffers[want], *rest)))
        elif op == "compile":
            number, kernel = payload
            self.compiled[number] = run_inline(device.compile(self.kernels[kernel]))
        elif op == "compile_many":
            pairs = payload[0]
            compiled = run_inline(device.compile_many([self.kernels[kernel] for _, kernel in pairs]))
            answers = []
            for (number, _), result in zip(pairs, compiled, strict=True):
                if isinstance(result, Exception):
                    answers.append(error_answer(result))
                else:
                    self.compiled[number] = result
                    answers.append(None)
            return answers
        elif op == "start_compiles":
            device.start_compiles([self.kernels[kernel] for kernel in payload[0]])
        elif op == "dispatch":
            compiled, args, grid, repeats = payload
            device.dispatch(self.compiled[compiled], self.args[args], grid, repeats)
        elif op == "profile":
            number, compiled, args, grid, repeats = payload
            self.profiles[number] = run_inline(device.profile(self.compiled[compiled], self.args[args], grid, repeats))
        elif op == "resolve":
            return run_inline(device.resolve(self.profiles.pop(payload[0])))
        elif op == "empty":
            return run_inline(device.time_empty_pass())
        elif op == "sync":
            run_inline(device.sync())
        else:
            raise ValueError(f"the tuning process has no operation {op!r}")
        return None

    def take_shared(self, op: str, payload: tuple) -> tuple[tuple, mmap.mmap | None]:
        """``payload`` with its :class:`Shared` replaced by the memory file sent beside it, mapped,
        and that mapping (None: there was none). Called on every request as it arrives, before
        anything of it can fail: each Shared takes the next file off the socket, so one left
        there would hand every later Shared the file before its own."""
        if op != "create" or not isinstance(payload[1], Shared):
            return payload, None
        if self.shared is None:
            raise ValueError("the parent sent shared memory, but this process has no socket to receive it")
        mapped = receive_shared(self.shared, payload[1])
        return (payload[0], mapped, *payload[2:]), mapped

    def _create(self, data: bytes | mmap.mmap | None, size: int, usage: int | None) -> Any:
        if usage is None:
            return self.device.create_buffer(data, size=size)
        shim = self.device.shim  # the call's own usage, as the parent's clone_buffer keeps it
        buffer = shim.create_buffer(max(4, (size + 3) // 4 * 4), usage | shim.COPY_SRC | shim.COPY_DST)
        if data:
            shim.write_buffer(buffer, 0, data if len(data) % 4 == 0 else bytes(data) + bytes(-len(data) % 4))
        return buffer


def close_mapped(mapped: mmap.mmap | None) -> None:
    """Unmap a memory file a request brought, unless a failed write's traceback still holds views
    of it (BufferError, which would hide that failure): then it is unmapped when they go."""
    if mapped is not None:
        with contextlib.suppress(BufferError):
            mapped.close()


def open_device(spec: OpenSpec) -> Any:
    """The device ``spec`` names (see :class:`OpenSpec`)."""
    from wgtune.backends.native import NativeDevice

    options: dict = {"use_timestamps": spec.timestamps}
    if spec.api == "dawn":
        from wgtune.backends.dawn import DawnDevice as opener

        options["runtime_checks"] = spec.runtime_checks
    else:
        opener = NativeDevice
    if spec.adapter_index is not None:
        return opener.open(adapter_index=spec.adapter_index, **options)
    if spec.identity is not None:
        for adapter in opener.indexed_adapters():
            if opener.identity_of(dict(adapter.info)).as_dict() == spec.identity:
                return opener.open_adapter(adapter, **options)
    return opener.open(spec.power_preference, **options)


def _answer(out: BinaryIO, message: tuple) -> None:
    pickle.dump(message, out, protocol=pickle.HIGHEST_PROTOCOL)
    out.flush()


def _watch_parent() -> None:
    parent = os.getppid()
    while True:
        time.sleep(PARENT_CHECK_SECONDS)
        if os.getppid() != parent:
            os._exit(3)


def main() -> int:
    # Ctrl-C at a terminal reaches the whole process group: the parent decides, and kills this one.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, daemon=True).start()
    # The socket memory files come over (worker_link.py), kept from what a driver may start.
    descriptor = os.environ.pop(SOCKET_VARIABLE, None)
    shared = socket.socket(fileno=int(descriptor)) if descriptor else None
    if shared is not None:
        shared.set_inheritable(False)
    # The answers get a descriptor of their own: whatever a driver prints goes to standard error.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    requests = sys.stdin.buffer
    try:
        _, spec = pickle.load(requests)
    except EOFError:
        return 0
    try:
        device = open_device(spec)
        info = DeviceInfo(device.identity.as_dict(), device.timing, device.background_compiles, device.compile_width,
                          device.idle_clocks)
    except Exception as error:
        _answer(out, error_answer(error))
        return 1
    _answer(out, ("ready", info))
    worker = Worker(device, shared)
    while True:
        try:
            prelude, op, payload = pickle.load(requests)
        except EOFError:
            return 0
        mapped = None
        try:
            payload, mapped = worker.take_shared(op, payload)
            for item in prelude:
                worker.declare(item)
            _answer(out, ("ok", worker.run(op, payload)))
        except Exception as error:  # the parent raises it again, where the core decides whose failure it is
            _answer(out, error_answer(error))
        finally:
            close_mapped(mapped)

