"""A call's buffers reach the tuning process through shared memory, whole, or through the pipe
where none is to be had (backends/worker_link.py, on lavapipe)."""

from __future__ import annotations

import errno
import os
import socket

import pytest

from wgtune import Args
from wgtune.backends import isolated_worker, worker_link
from wgtune.backends.isolated_worker import OpenSpec
from wgtune.backends.native import NativeDevice
from wgtune.backends.remote_device import RemoteDevice, read_ahead
from wgtune.backends.worker_link import SHARED_BYTES, Shared, WorkerLink
from wgtune.errors import DeviceLost, KernelError
from wgtune.runner import run_inline

pytestmark = pytest.mark.skipif(not worker_link.CAN_SHARE, reason="no memfd_create here: the pipe is the only way")

# Larger than the threshold and not whole words: the process pads it, as it pads what the pipe brings.
NBYTES = SHARED_BYTES + 6


@pytest.fixture(scope="module")
def home() -> NativeDevice:
    return NativeDevice.open()


def pattern(nbytes: int, seed: int) -> bytes:
    return bytes((index * 7 + seed) % 251 for index in range(256)) * (nbytes // 256) + bytes(nbytes % 256)


def remote_on(home: NativeDevice, link: WorkerLink) -> tuple[RemoteDevice, list[tuple]]:
    """A tuning process on ``link``, and the requests sent to it, recorded as they go."""
    sent: list[tuple] = []
    send = link.send

    def recording(message: tuple) -> bool:
        sent.append(message)
        return send(message)

    link.send = recording
    return RemoteDevice(home, OpenSpec(None, None), link), sent


def carried(sent: list[tuple]) -> list:
    """What each ``create`` request carried as its data."""
    return [message[2][1] for message in sent if message[1] == "create"]


def filled_types(link: WorkerLink) -> list[type]:
    """The types of what ``link`` is given to fill, recorded as it goes (a view: no bytes made first)."""
    given: list[type] = []
    fill = link.fill

    def recording(data):
        given.append(type(data))
        return fill(data)

    link.fill = recording
    return given


def read_there(remote: RemoteDevice, buffer) -> bytes:
    return run_inline(remote.read_buffer(buffer))


@pytest.mark.parametrize("shared", [True, False])
def test_a_calls_buffers_arrive_whole_through_shared_memory_or_the_pipe(home, shared):
    small, large = pattern(4096, 1), pattern(NBYTES, 2)
    args = Args((home.create_buffer(small), home.create_buffer(large)))
    remote, sent = remote_on(home, WorkerLink(shared=shared))
    try:
        remote.begin_tune(None)
        adopted = remote.adopt(args)
        assert read_there(remote, adopted.buffers[0]) == small
        assert read_there(remote, adopted.buffers[1]) == large + bytes(2)  # whole words, the padding zero
        made = remote.create_buffer(large)  # a buffer the tune makes there from data
        assert read_there(remote, made) == large + bytes(2)
        remote.end_tune()
    finally:
        remote.close()
    # Small data always rides in the request; large data only where nothing is shared.
    assert [type(data) for data in carried(sent)] == ([bytes, Shared, Shared] if shared else [bytes, bytes, bytes])
    if shared:
        # The call's buffer as read back from the tuner's GPU (whole words), and the data as given.
        assert [data.nbytes for data in carried(sent)[1:]] == [NBYTES + 2, NBYTES]


def test_a_calls_buffer_goes_from_the_mapped_staging_copy_to_shared_memory_without_a_copy_between(home):
    """The staging copy's mapping is written to the memory file straight: one host copy, not the
    bytes of it first (some 30 ms per 64 MiB here); the file is sent once the read is over."""
    data = pattern(NBYTES, 10)
    link = WorkerLink()
    given = filled_types(link)
    remote, sent = remote_on(home, link)
    try:
        remote.begin_tune(None)
        adopted = remote.adopt(Args((home.create_buffer(data),)))
        assert read_there(remote, adopted.buffers[0]) == data + bytes(2)
        remote.end_tune()
    finally:
        remote.close()
    assert given == [memoryview] and [type(data) for data in carried(sent)] == [Shared]


@pytest.mark.parametrize("shared", [True, False])
def test_buffers_read_ahead_of_the_process_s_start_arrive_whole_and_are_not_read_again(home, shared, monkeypatch):
    """A first tune reads its call's buffers while the process begun early still opens its device
    (``read_ahead``); adopting them then reads nothing more from the tuner's GPU."""
    small, large = pattern(4096, 21), pattern(NBYTES, 22)
    args = Args((home.create_buffer(small), home.create_buffer(large)))
    link = WorkerLink(shared=shared)
    read = read_ahead(home, link, args)
    assert sorted(read) == sorted(id(buffer) for buffer in args.buffers)
    reads: list = []
    monkeypatch.setattr(home, "read_buffer", lambda *given, **named: reads.append(given))
    remote, sent = remote_on(home, link)
    try:
        remote.begin_tune(None)
        adopted = remote.adopt(args, read)
        assert read_there(remote, adopted.buffers[0]) == small
        assert read_there(remote, adopted.buffers[1]) == large + bytes(2)
        remote.end_tune()
    finally:
        remote.close()
    assert reads == [] and read == {}
    assert [type(data) for data in carried(sent)] == ([bytes, Shared] if shared else [bytes, bytes])


@pytest.mark.parametrize("shared", [True, False])
def test_a_buffer_made_from_data_takes_it_in_one_copy_made_at_once(home, shared):
    """The data of ``create_buffer`` (a check's poisoned output: 64 MiB at 4096^2) goes to shared
    memory, or to bytes for the pipe, as given: no bytes of it first. What the caller changes
    after is not the buffer's."""
    data = bytearray(pattern(NBYTES, 11))
    link = WorkerLink(shared=shared)
    given = filled_types(link)
    remote, sent = remote_on(home, link)
    try:
        remote.begin_tune(None)
        made = remote.create_buffer(data)
        data[:4] = b"\0\0\0\0"
        assert read_there(remote, made) == pattern(NBYTES, 11) + bytes(2)
        remote.end_tune()
    finally:
        remote.close()
    assert given == [memoryview] and [type(data) for data in carried(sent)] == [Shared if shared else bytes]


def test_a_read_that_fails_after_its_file_was_written_sends_nothing_and_the_next_buffer_is_its_own(home, monkeypatch):
    """The staging buffer's unmap failing after the mapping was written to a memory file: the file
    never reaches the socket, so the next buffer's request takes its own (a review's repro)."""
    import wgpu.backends.wgpu_native._api as wgpu_api

    real_unmap = wgpu_api.GPUBuffer.unmap
    failures = [RuntimeError("unmap failed (simulated)")]

    def failing_once(buffer):
        real_unmap(buffer)
        if failures:
            raise failures.pop()

    first, second = pattern(NBYTES, 12), pattern(NBYTES, 13)
    remote, sent = remote_on(home, WorkerLink())
    try:
        remote.begin_tune(None)
        monkeypatch.setattr(wgpu_api.GPUBuffer, "unmap", failing_once)
        with pytest.raises(KernelError, match="unmap failed"):
            remote.adopt(Args((home.create_buffer(first),)))
        monkeypatch.undo()
        assert remote.broken is None
        assert read_there(remote, remote.create_buffer(second)) == second + bytes(2)
        remote.end_tune()
    finally:
        remote.close()
    assert [type(data) for data in carried(sent)] == [Shared]


def test_an_interrupted_write_to_shared_memory_leaves_no_live_view_of_the_data_in_its_traceback(home, monkeypatch):
    """Ctrl-C while a mapped staging copy is written to a memory file: by the time anyone reads the
    traceback the mapping is gone, so every view of it the link's frames hold is released (reading
    one would read freed memory)."""
    def interrupted(descriptor, data):
        raise KeyboardInterrupt

    remote, _ = remote_on(home, WorkerLink())
    try:
        remote.begin_tune(None)
        source = home.create_buffer(pattern(NBYTES, 14))
        monkeypatch.setattr(os, "write", interrupted)
        with pytest.raises(KeyboardInterrupt) as raised:
            remote.adopt(Args((source,)))
        monkeypatch.undo()
    finally:
        remote.close()
    views = []
    frame = raised.value.__traceback__
    while frame is not None:
        if frame.tb_frame.f_code.co_filename.endswith("worker_link.py"):
            views += [value for value in frame.tb_frame.f_locals.values() if isinstance(value, memoryview)]
        frame = frame.tb_next
    assert views  # the link's frames are there, with their views
    for view in views:
        with pytest.raises(ValueError, match="released"):
            len(view)


def test_with_memory_short_the_data_goes_through_the_pipe_and_nothing_is_lost(home, monkeypatch):
    def short(*_):
        raise OSError(errno.ENOMEM, "Cannot allocate memory")

    data = pattern(NBYTES, 3)
    remote, sent = remote_on(home, WorkerLink())
    try:
        assert remote.link.shares
        remote.begin_tune(None)
        monkeypatch.setattr(os, "memfd_create", short)
        adopted = remote.adopt(Args((home.create_buffer(data),)))
        assert read_there(remote, adopted.buffers[0]) == data + bytes(2)
        monkeypatch.undo()  # memory back: the next buffer is shared again, and the process still takes it
        later = pattern(NBYTES, 4)
        assert read_there(remote, remote.create_buffer(later)) == later + bytes(2)
        remote.end_tune()
    finally:
        remote.close()
    assert [type(data) for data in carried(sent)] == [bytes, Shared]


def test_a_file_that_fills_the_memory_half_way_is_the_pipe_s_too(home, monkeypatch):
    """A write cut short (the memory ran out part way) leaves the file, and the data goes by pipe."""
    real_write = os.write
    writes = []

    def failing_second_write(descriptor, data):
        writes.append(len(data))
        if len(writes) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(descriptor, data[: len(data) // 2])

    data = pattern(NBYTES, 5)
    remote, sent = remote_on(home, WorkerLink())
    try:
        remote.begin_tune(None)
        monkeypatch.setattr(os, "write", failing_second_write)
        made = remote.create_buffer(data)
        monkeypatch.undo()
        assert read_there(remote, made) == data + bytes(2)
        remote.end_tune()
    finally:
        remote.close()
    assert len(writes) == 2 and [type(data) for data in carried(sent)] == [bytes]


def test_a_closed_link_leaves_no_descriptor_open_here(home):
    """The socket and every memory file are closed with the link: a tuner that restarts its tuning
    process again and again does not run out of descriptors."""
    if not os.path.isdir(f"/proc/{os.getpid()}/fd"):
        pytest.skip("no /proc here to count descriptors")  # CAN_SHARE is Linux: /proc is there

    def open_descriptors() -> int:
        return len(os.listdir(f"/proc/{os.getpid()}/fd"))

    data = pattern(NBYTES, 6)
    remote, _ = remote_on(home, WorkerLink())
    remote.close()  # a first one: whatever opens once per process (the adapter's files) is open now
    before = open_descriptors()
    for _ in range(3):
        remote, _ = remote_on(home, WorkerLink())
        remote.begin_tune(None)
        assert read_there(remote, remote.create_buffer(data)) == data + bytes(2)
        remote.end_tune()
        remote.close()
    assert open_descriptors() == before


def test_a_request_that_fails_before_its_shared_data_is_used_leaves_the_next_one_its_own(home):
    """Each Shared takes its own memory file off the socket, whatever fails: a file left there
    would hand every later buffer the one before it, silently."""
    first, second = pattern(NBYTES, 7), pattern(NBYTES, 8)
    remote, sent = remote_on(home, WorkerLink())
    try:
        remote.begin_tune(None)
        remote._prelude.append(("values", 987654, 1, ()))  # refers to a call the process never had: it fails
        remote.create_buffer(first)
        made = remote.create_buffer(second)
        with pytest.raises(Exception, match="987654"):  # the failed request's error, at the next call
            read_there(remote, made)
        assert read_there(remote, made) == second + bytes(2)
        remote.end_tune()
    finally:
        remote.close()
    assert [type(data) for data in carried(sent)] == [Shared, Shared]


def test_a_failed_write_of_shared_data_comes_back_as_its_own_error():
    """Not as the BufferError of unmapping a file its traceback still holds views of."""

    class LostOnWrite:
        def create_buffer(self, data, size=0):
            view = memoryview(data).cast("B")  # as WebGPUDevice.create_buffer holds it
            raise DeviceLost(f"the GPU went away writing {len(view)} bytes")

    ours, theirs = socket.socketpair()
    link = WorkerLink.__new__(WorkerLink)  # only its socket: no process
    link._socket = ours
    try:
        shared = link.send_filled(link.fill(pattern(NBYTES, 9)))
        assert isinstance(shared, Shared)
        worker = isolated_worker.Worker(LostOnWrite(), theirs)
        payload, mapped = worker.take_shared("create", (1, shared, NBYTES, None))
        with pytest.raises(DeviceLost) as raised:
            worker.run("create", payload)
        isolated_worker.close_mapped(mapped)  # its traceback, kept here, still holds the view: no BufferError
        answer = isolated_worker.error_answer(raised.value)
        assert answer[:2] == ("error", "DeviceLost") and str(NBYTES) in answer[2], answer
    finally:
        ours.close()
        theirs.close()
