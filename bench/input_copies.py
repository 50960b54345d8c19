"""What copying a call's inputs to the tuning process costs, and where it goes.

A tune in the tuning process (``backends/isolation.py``) first copies the call's buffers there
(``RemoteDevice.adopt``): each is read back from the tuner's GPU, sent to the process, and written
to its GPU. This opens the default adapter here and a tuning process on it, makes ``--buffers``
buffers of ``--mib`` MiB (matmul 4096^3's A, B and C: 3 of 64), and times, round by round:

- ``read back``: the reads from the tuner's own GPU alone (``read_buffer``), as the copy makes them;
- ``adopt``: the whole copy, from ``adopt`` until the process answers a call queued behind it;
- the same with the buffers sent through the pipe, as before shared memory (``--pipe-too``);
- the same through shared memory with each read made bytes first and the bytes written to the
  memory file, as before session 38 wrote the staging copy's mapping there straight
  (``--bytes-first-too``: one host copy more).

Figures are seconds and MB/s of the whole copy; the pipe and shared memory alternate, round by
round, so that a busy machine's drift hits both alike.

    python bench/input_copies.py [--mib 64] [--buffers 3] [--rounds 5] [--pipe-too] [--bytes-first-too]

A benchmark, not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--buffers", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pipe-too", action="store_true", help="also time the copies through the pipe")
    parser.add_argument("--bytes-first-too", action="store_true",
                        help="also time shared memory with each read copied to bytes first (before session 38)")
    options = parser.parse_args()

    from wgtune import Args
    from wgtune.backends import worker_link
    from wgtune.backends.isolated_worker import OpenSpec
    from wgtune.backends.native import NativeDevice
    from wgtune.backends.remote_device import RemoteDevice
    from wgtune.runner import run_inline

    home = NativeDevice.open()
    nbytes = options.mib << 20
    pattern = bytes(range(256)) * (nbytes // 256)
    buffers = [home.create_buffer(pattern, size=nbytes) for _ in range(options.buffers)]
    args = Args(tuple(buffers))
    total = nbytes * len(buffers)
    print(f"{home.identity.device} ({home.identity.backend}): {len(buffers)} buffers of {options.mib} MiB "
          f"({total / 1e6:.0f} MB) to the tuning process, {options.rounds} rounds")

    ways = ["shared"] + (["pipe"] if options.pipe_too else []) + (["bytes first"] if options.bytes_first_too else [])
    read_buffer = home.read_buffer

    async def bytes_first(buffer, take=bytes):  # the mapping copied to bytes, then the bytes taken
        return take(await read_buffer(buffer))

    remotes = {}
    for way in ways:
        link = worker_link.WorkerLink(shared=way != "pipe")
        remotes[way] = RemoteDevice(home, OpenSpec(None, None), link)
        print(f"  {way}: the link sends bulk data {'through shared memory' if link.shares else 'through the pipe'}")
    reads: list[float] = []
    copies: dict[str, list[float]] = {way: [] for way in ways}
    for round_number in range(options.rounds):
        began = time.perf_counter()
        for buffer in buffers:
            run_inline(home.read_buffer(buffer))
        reads.append(time.perf_counter() - began)
        for way in ways if round_number % 2 == 0 else ways[::-1]:
            remote = remotes[way]
            remote.begin_tune(None)
            home.read_buffer = bytes_first if way == "bytes first" else read_buffer
            began = time.perf_counter()
            adopted = remote.adopt(args)
            run_inline(remote.sync())  # answered once the process has written every buffer to its GPU
            copies[way].append(time.perf_counter() - began)
            if round_number == 0:  # what arrived is what was sent
                assert run_inline(remote.read_buffer(adopted.buffers[-1])) == pattern, way
            remote.end_tune()
    home.read_buffer = read_buffer
    for remote in remotes.values():
        remote.close()

    def line(label: str, seconds: list[float]) -> str:
        median = statistics.median(seconds)
        return (f"  {label:28s} median {median:.3f} s ({total / median / 1e6:6.0f} MB/s); "
                f"each: {' '.join(f'{s:.3f}' for s in seconds)}")

    print(line("read back (tuner's GPU)", reads))
    for way in ways:
        print(line(f"adopt, {way}", copies[way]))


if __name__ == "__main__":
    main()
