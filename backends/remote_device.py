"""A tune's device in another process: every launch bounded, a runaway killed with its process.

:class:`RemoteDevice` is a :class:`~wgtune.gpu.device.Device` whose every call is carried out by
the tuning process (``isolated_worker.py``) on a device of its own, opened on the same adapter as
the tuner's. The core tunes on it unchanged: compiles, first launches, output checks, warmups,
calibration and samples all run there, so every candidate is timed the same way, and the
comparison passes and readbacks of the checks too. Objects stay in that process; here they are
handles (``remote_handles.py``), freed there once dropped here.

Each call waits for its answer no longer than the launches it has in hand allow
(``launch_ledger.py``). Past that, or when the process dies, it is killed and the call raises
:class:`ProcessStopped` naming the candidate whose launches were running:
:class:`~wgtune.backends.isolation.WorkerGuard` then tunes the key again without it, in a new
process. Ctrl-C while waiting kills the process too, and reaches the caller at once.
"""

from __future__ import annotations

import itertools
import time
import weakref
from collections.abc import Sequence
from typing import Any

from wgtune import errors
from wgtune.gpu.comparison import Comparison, element_size
from wgtune.gpu.device import Device, DeviceLimits
from wgtune.gpu.wake import SPIN_KERNEL
from wgtune.runner import run_inline
from wgtune.sets.args import Args, Grid
from wgtune.sets.kernel import Kernel
from wgtune.tune.log import logger

from .isolated_worker import DeviceInfo, KernelSpec, OpenSpec, RaisedBy, relayed
from .launch_ledger import LaunchLedger, deadline
from .remote_handles import ProcessStopped, RemoteBuffer, RemoteCompiled, RemoteProfile
from .worker_link import DIED, Filled, Shared, WorkerLink

__all__ = ["RemoteDevice"]

START_SECONDS = 60.0
"""Seconds the tuning process may take to start (import wgpu, open its device)."""
COMPILE_SECONDS = 120.0
"""Seconds a compile may take, plus :data:`PER_COMPILE_SECONDS` for each kernel compiled at once."""
PER_COMPILE_SECONDS = 30.0
OP_SECONDS = 60.0
"""Seconds any other call may take when no launch is in hand: the process is stuck past that."""

# WebGPU's buffer usage flags (the spec's numbers, wgpu-py's too).
COPY_SRC = 0x4
COPY_BOTH_WAYS = COPY_SRC | 0x8  # COPY_SRC | COPY_DST
STORAGE_USAGE = 0x80 | COPY_BOTH_WAYS

_SERIALS = itertools.count(1)


def read_ahead(home: Any, link: WorkerLink, args: Args) -> dict[int, bytes | Filled]:
    """The contents of ``args``' buffers of the tuner's device ``home`` that a tune copies to the
    tuning process (those with COPY_SRC), read now for :meth:`RemoteDevice.adopt` on ``link``, by
    ``id``: a first tune reads them while the process begun early is still opening its device (what
    was left of that start took 0.24-0.39 s of an H100's first tune, the reads 0.18 s). Each is a
    memory file or bytes (``WorkerLink.fill``); a file dropped unsent is closed."""
    read: dict[int, bytes | Filled] = {}
    for buffer in args.buffers:
        if not isinstance(buffer, RemoteBuffer) and id(buffer) not in read and int(buffer.usage) & COPY_SRC:
            read[id(buffer)] = _read(home, link, buffer)
    return read


def _read(home: Any, link: WorkerLink, buffer: Any) -> bytes | Filled:
    """``buffer`` of the tuner's device read for ``link``: the staging copy's mapping written to a
    memory file straight (or copied for the pipe), sent only once the read is over
    (``RemoteDevice._carried``), so that a read that fails after it was written sends nothing."""
    return run_inline(home.read_buffer(buffer, take=link.fill))


class RemoteDevice(Device):
    """The tuning process's device, seen from the tuner's process (see the module doc). ``home``
    is the tuner's own device: its identity, limits and features are this one's (a candidate
    must fit where the winner will run), and buffers of it handed here are copied over."""

    def __init__(self, home: Any, spec: OpenSpec, link: WorkerLink | None = None, *, opened: bool = False) -> None:
        """``opened``: ``link``'s process was already told to open ``spec`` (a process begun early:
        ``isolation.begin_tuning_process``); its answer is what is waited for here."""
        self.home = home
        self.identity = home.identity
        self.limits: DeviceLimits = home.limits
        self.features = home.features
        self.serial = next(_SERIALS)
        self.ledger = LaunchLedger()
        self.link = link if link is not None else WorkerLink()
        self.broken: BaseException | None = None
        self._numbers = itertools.count(1)
        self._prelude: list[tuple] = []
        self._frees: list[tuple] = []
        self._kernels: dict[int, tuple[Kernel, int]] = {}
        self._values: set[tuple[int, int]] = set()
        self._imported: dict[int, tuple[Any, RemoteBuffer]] = {}
        self._background: set[int] = set()  # kernels whose compiles were begun there and not yet taken
        self._posted = 0  # calls sent whose answers are still to be read
        self._posted_bytes = 0  # bytes of buffers posted to the process since the last answer read
        try:
            if not opened:
                self.link.send(("open", spec))
            info: DeviceInfo = self._answer(self.link.receive(START_SECONDS), "starting", START_SECONDS)
        except BaseException:
            self.link.close()
            raise
        self.worker_identity = info.identity
        self.timing = info.timing
        self.clock_grain = home.clock_grain
        self.background_compiles = info.background_compiles
        self.compile_width = info.compile_width
        self.idle_clocks = info.idle_clocks

    @property
    def pid(self) -> int:
        return self.link.pid

    # -- the tune ---------------------------------------------------------------------------

    def begin_tune(self, time_limit: float | None) -> None:
        """A new tune, with the configured ``time_limit`` (None: relative, ``time_limit.py``).
        What an earlier tune left running is waited for first, its errors dropped (that tune is
        over); ProcessStopped when that runs past its deadline."""
        if self._posted or self.ledger.in_hand:
            try:
                run_inline(self.sync())
            except Exception as error:
                logger.debug("an earlier tune's last calls failed: %s", error)
        self.ledger.begin_tune(time_limit)
        self._imported.clear()

    def end_tune(self) -> None:
        """The tune is over: the tuner's buffers copied for it are let go, and what it made
        there is freed now rather than at the next tune (a second device's memory on the GPU)."""
        self._imported.clear()
        if self._frees and self.broken is None and not self.ledger.in_hand:
            self._call("sync", (), self._wait(0))

    def adopt(self, args: Args, read: dict[int, bytes | Filled] | None = None) -> Args:
        """``args`` on buffers of the tuning process (the tuner's buffers copied over). ``read``:
        buffers' contents already read from the tuner's device (:func:`read_ahead`), by ``id``."""
        read = read or {}
        return args.with_buffers([self._import(buffer, read.pop(id(buffer), None)) for buffer in args.buffers])

    def close(self) -> None:
        """Stop the tuning process; every later call raises."""
        if self.broken is None:
            self.broken = ProcessStopped("the tuning process was closed")
        self.link.close()

    # -- buffers ----------------------------------------------------------------------------

    def create_buffer(self, data: bytes | bytearray | memoryview | None = None, *, size: int = 0) -> RemoteBuffer:
        view = memoryview(data).cast("B") if data is not None else None
        nbytes = len(view) if view is not None else size
        # As WebGPUDevice.create_buffer makes it there: whole words, at least one; storage, copyable.
        # Copied once, now: to shared memory, or to bytes for the pipe (a check's poisoned output: 64 MiB at 4096^2).
        carried = self._shared(view) if view is not None else None
        return self._posted_buffer("create", (carried, nbytes, None), _whole_words(nbytes), STORAGE_USAGE)

    def clone_buffer(self, buffer: Any) -> RemoteBuffer:
        source = self._import(buffer)
        return self._posted_buffer("clone", (source.number,), source.size, source.usage | COPY_BOTH_WAYS)

    def copy_buffer(self, source: Any, destination: Any) -> None:
        source = self._import(source)
        self._post("copy", (source.number, self._import(destination).number))

    async def read_buffer(self, buffer: Any) -> bytes:
        buffer = self._import(buffer)
        data = self._call("read", (buffer.number,), self._wait(buffer.size))
        self.ledger.done(time.perf_counter())
        return data

    def read_buffer_sync(self, buffer: Any) -> bytes:
        """As ``NativeDevice.read_buffer_sync``, for an ``input_gen`` written for it."""
        return run_inline(self.read_buffer(buffer))

    async def compare_buffers(self, got: Any, want: Any, typecode: str, count: int, atol: float,
                              rtol: float) -> Comparison:
        got, want = self._import(got), self._import(want)
        fields = self._call("compare", (got.number, want.number, typecode, count, atol, rtol),
                            self._wait(count * element_size(typecode)))
        self.ledger.done(time.perf_counter())
        return Comparison(*fields)

    def _posted_buffer(self, op: str, payload: tuple, size: int, usage: int) -> RemoteBuffer:
        number = next(self._numbers)
        self._post(op, (number, *payload))
        return self._handle(RemoteBuffer(self.serial, number, size, usage), "buffer")

    def _import(self, buffer: Any, read: bytes | Filled | None = None) -> RemoteBuffer:
        """This process's handle for ``buffer``: itself, or a copy of a buffer of the tuner's
        device (made once per tune), from its contents as ``read`` ahead where given."""
        if isinstance(buffer, RemoteBuffer):
            if buffer.owner != self.serial:
                raise errors.KernelError("a buffer of an earlier tuning process, which was stopped")
            return buffer
        known = self._imported.get(id(buffer))
        if known is not None and known[0] is buffer:
            return known[1]
        usage = int(buffer.usage)
        carried: bytes | Shared | None = None
        if usage & COPY_SRC:
            carried = self._carried(read if read is not None else _read(self.home, self.link, buffer))
            nbytes = carried.nbytes if isinstance(carried, Shared) else len(carried)
        else:  # nobody can copy it (the app made it without COPY_SRC): zero-filled, as clone_buffer's stand-in
            nbytes = int(buffer.size)
        # Posted, not waited for: the process writes it to its GPU while this one reads the next
        # buffer from its own (a call's inputs at 4096^3 are 192 MB). The size and usage are what
        # the process makes (whole words; the call's usage, copyable).
        self._posted_bytes += nbytes  # the next call's wait covers moving them
        remote = self._posted_buffer("create", (carried, nbytes, usage), _whole_words(nbytes),
                                     usage | COPY_BOTH_WAYS)
        self._imported[id(buffer)] = (buffer, remote)
        return remote

    def _shared(self, data: bytes | memoryview) -> bytes | Shared:
        """``data`` as the next request carries it: large data through shared memory where it can,
        else bytes (a view copied: ``WorkerLink.fill``)."""
        return self._carried(self.link.fill(data))

    def _carried(self, filled: bytes | Filled) -> bytes | Shared:
        """What the next request carries for ``filled`` (``WorkerLink.send_filled``)."""
        if self.broken is not None:  # no request goes, nor its file (a Filled dropped closes it)
            raise self.broken
        return self.link.send_filled(filled)

    # -- kernels ----------------------------------------------------------------------------

    async def compile(self, kernel: Kernel) -> RemoteCompiled:
        number, kernel_number = next(self._numbers), self._kernel(kernel)
        self._call("compile", (number, kernel_number), self._compile_seconds(1), suspects=(kernel.name,))
        self._background.discard(kernel_number)
        return self._handle(RemoteCompiled(number, kernel), "compiled")

    async def compile_many(self, kernels: Sequence[Kernel]) -> list[RemoteCompiled | Exception]:
        pairs = [(next(self._numbers), self._kernel(kernel)) for kernel in kernels]
        answers = self._call("compile_many", (pairs,), self._compile_seconds(len(pairs)),
                             suspects=tuple(kernel.name for kernel in kernels))
        self._background.difference_update(kernel_number for _, kernel_number in pairs)
        return [self._handle(RemoteCompiled(number, kernel), "compiled") if answer is None else _raised(*answer[1:])
                for (number, _), kernel, answer in zip(pairs, kernels, answers, strict=True)]

    def start_compiles(self, kernels: Sequence[Kernel]) -> None:
        numbers = [self._kernel(kernel) for kernel in kernels]
        self._post("start_compiles", (numbers,))
        self._background.update(numbers)

    def _compile_seconds(self, count: int) -> float:
        return deadline(self.ledger.budget(), base=COMPILE_SECONDS + PER_COMPILE_SECONDS * count)

    def _kernel(self, kernel: Kernel) -> int:
        """The number of ``kernel`` in the tuning process, declared there on first use."""
        known = self._kernels.get(id(kernel))
        if known is not None and known[0] is kernel:
            return known[1]
        number = next(self._numbers)
        self._kernels[id(kernel)] = (kernel, number)
        self._prelude.append(("kernel", number, _spec(kernel)))
        return number

    # -- launches ---------------------------------------------------------------------------

    def dispatch(self, pipeline: RemoteCompiled, args: Args, grid: Grid, repeats: int = 1) -> None:
        payload = (pipeline.number, self._args(args, pipeline.kernel), tuple(grid), repeats)
        self._launch("dispatch", payload, pipeline.kernel, repeats)

    async def profile(self, pipeline: RemoteCompiled, args: Args, grid: Grid, repeats: int) -> RemoteProfile:
        number = next(self._numbers)
        payload = (number, pipeline.number, self._args(args, pipeline.kernel), tuple(grid), repeats)
        sequence = self._launch("profile", payload, pipeline.kernel, repeats)
        return self._handle(RemoteProfile(number, sequence), "profile")

    async def resolve(self, profile: RemoteProfile) -> float:
        seconds = self._call("resolve", (profile.number,), self._wait(0))
        self.ledger.done_until(profile.sequence, time.perf_counter())
        return seconds

    async def time_empty_pass(self) -> tuple[float, float]:
        readings = self._call("empty", (), self._wait(0))
        self.ledger.done(time.perf_counter())
        return readings

    async def sync(self) -> None:
        self._call("sync", (), self._wait(0))
        self.ledger.done(time.perf_counter())

    def _launch(self, op: str, payload: tuple, kernel: Kernel, count: int) -> int:
        """Submit launches of ``kernel``, once the launches of any other candidate are done (so
        that a runaway is always one candidate's); answers their sequence in the ledger."""
        if self.ledger.other_candidates(kernel):
            run_inline(self.sync())
        sequence = self.ledger.submit(kernel, kernel.name, count, time.perf_counter(),
                                      observed=kernel is not SPIN_KERNEL)
        self._post(op, payload)
        return sequence

    def _args(self, args: Args, kernel: Kernel) -> int:
        """The number of ``args`` in the tuning process (declared on first use), with the values
        ``kernel``'s functions give on it declared too."""
        slot = ("wgtune-remote-args", self.serial)
        number = args.cache.get(slot)
        if number is None:
            buffers = [self._import(buffer).number for buffer in args.buffers]
            number = args.cache[slot] = next(self._numbers)
            self._prelude.append(("args", number, buffers, args.params, args.names))
            weakref.finalize(args, self._frees.append, ("free", number, "args"))
        kernel_number = self._kernel(kernel)
        if (number, kernel_number) not in self._values:
            values = _values(kernel, args)  # a function that raises raises here, as in process
            self._prelude.append(("values", number, kernel_number, values))
            self._values.add((number, kernel_number))
        return number

    # -- the link ---------------------------------------------------------------------------

    def _wait(self, nbytes: int) -> float:
        """How long a call may take: the budget of the launches in hand, else :data:`OP_SECONDS`."""
        nbytes += self._posted_bytes
        if self.ledger.in_hand:
            return deadline(self.ledger.budget(), nbytes)
        return deadline(0.0, nbytes, base=OP_SECONDS)

    def _handle(self, handle: Any, kind: str) -> Any:
        weakref.finalize(handle, self._frees.append, ("free", handle.number, kind))
        return handle

    def _message(self, op: str, payload: tuple) -> tuple:
        """The request of ``op``, with what it refers to declared first and what was dropped freed."""
        if self.broken is not None:
            raise self.broken
        frees, self._frees = self._frees, []
        prelude, self._prelude = frees + self._prelude, []
        return prelude, op, payload

    def _post(self, op: str, payload: tuple) -> None:
        """Send a call whose answer nobody waits for (a launch, a copy): the next :meth:`_call`
        reads it, and raises its error if it failed. Natively the same call raises at once; here
        it raises at the next one, which the core makes within the same candidate's step."""
        message = self._message(op, payload)
        try:
            sent = self.link.send(message)
        except BaseException:
            self._stop(ProcessStopped("the tune was interrupted"))
            raise
        if not sent:
            self._answer((DIED, ""), op, 0.0)
        self._posted += 1

    def _call(self, op: str, payload: tuple, seconds: float, suspects: Sequence[str] = ()) -> Any:
        """Send ``op`` and wait for its answer, and those of the calls posted before it, for
        ``seconds`` at most in all."""
        message = self._message(op, payload)
        started = time.perf_counter()
        failed = None  # the first error a posted call answered: raised for this call
        try:
            if not self.link.send(message):
                return self._answer((DIED, ""), op, 0.0, suspects)
            while True:
                answer = self.link.receive(started + seconds - time.perf_counter())
                if answer is None or answer[0] == DIED or not self._posted:
                    break
                self._posted -= 1
                if answer[0] == "error" and failed is None:
                    failed = answer
            self._posted_bytes = 0
        except BaseException:  # Ctrl-C while the process works: its state is unknown, so it goes
            self._stop(ProcessStopped("the tune was interrupted"))
            raise
        if failed is not None and answer is not None and answer[0] in ("ok", "error"):
            answer = failed
        return self._answer(answer, op, time.perf_counter() - started, suspects)

    def _answer(self, answer: tuple | None, op: str, waited: float, suspects: Sequence[str] = ()) -> Any:
        if answer is not None and answer[0] in ("ok", "ready"):
            return answer[1]
        if answer is not None and answer[0] == "error":
            raise _raised(*answer[1:])
        in_hand = self.ledger.culprits()
        if answer is None:
            why = self.ledger.describe(waited) if in_hand else f"{op} did not answer within {waited:.3g} s"
            self._stop(ProcessStopped(f"{why} in the tuning process, which was stopped", in_hand or suspects,
                                      timed_out=True))
        else:
            self.link.close()
            status = self.link.exit_status() or f"its answer could not be read: {answer[1]}"
            # With compiles running in the background, any of them may have killed it: nobody is named.
            named = () if self._background else (in_hand or suspects)
            self._stop(ProcessStopped(f"the tuning process died while it ran {op} ({status})", named))
        raise self.broken

    def _stop(self, why: ProcessStopped) -> None:
        self.broken = why
        self.ledger.reset()
        self.link.close()


def _whole_words(nbytes: int) -> int:
    """The size of the buffer the process makes for ``nbytes``: whole words, at least one."""
    return max(4, (nbytes + 3) // 4 * 4)


def _raised(kind: str, message: str, reason: str | None = None) -> BaseException:
    """The exception the tuning process answered, raised again here as the core knows it."""
    if kind == "DeviceLost":
        return errors.DeviceLost(reason if reason is not None else message)
    cls = getattr(errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, errors.WgtuneError) and kind != "NoValidKernelFound":
        return cls(message)
    return relayed(kind, message)


def _spec(kernel: Kernel) -> KernelSpec:
    return KernelSpec(kernel.name, kernel.wgsl, kernel.entry_point, dict(kernel.constants), tuple(kernel.features),
                      kernel.workgroup_size, kernel.workgroup_storage, kernel.runtime_checks,
                      kernel.params is not None, tuple(kernel.scratch), tuple(_spec(stage) for stage in kernel.then),
                      kernel.layout)


def _values(kernel: Kernel, args: Args) -> tuple:
    """What ``kernel``'s functions give on ``args``: the grid of each stage after the first (the
    first's comes with each launch), each stage's own params, and each scratch size (or what
    its function raised, which the tuning process raises where it would have been called)."""
    grids = (None, *(tuple(stage.grid(args)) for stage in kernel.then))
    params = tuple(None if stage.params is None else tuple(stage.params(args)) for stage in kernel.stages)
    scratch = {}
    for name, size in kernel.scratch.items():
        try:
            scratch[name] = size(args)
        except Exception as error:
            scratch[name] = RaisedBy(type(error).__name__, str(error))
    return grids, params, scratch
