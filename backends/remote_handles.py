"""What stands here for the tuning process's objects, and its end (``remote_device.py``).

A buffer, a compiled candidate and a timed pass of the tuning process are handles here: their
numbers there, and what the core asks of them (a buffer's size and usage, a candidate's
functions). :class:`ProcessStopped` is how a tune learns that the process, and all it held, is gone.
"""

from __future__ import annotations

from collections.abc import Sequence

from wgtune.sets.kernel import Kernel

__all__ = ["ProcessStopped", "RemoteBuffer", "RemoteCompiled", "RemoteProfile"]


class ProcessStopped(BaseException):
    """The tuning process was killed (a wait ran past its deadline) or died. ``candidates`` are
    those whose launches (or compile) it was running, ``timed_out`` whether it was killed at a
    deadline. A BaseException, like KeyboardInterrupt: it must unwind the whole tune past the
    core's per-candidate handlers, since the tune's state died with the process."""

    def __init__(self, reason: str, candidates: Sequence[str] = (), *, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.candidates = tuple(candidates)
        self.timed_out = timed_out


class RemoteBuffer:
    """A buffer of the tuning process: its number there, its size and usage."""

    __slots__ = ("__weakref__", "number", "owner", "size", "usage")

    def __init__(self, owner: int, number: int, size: int, usage: int) -> None:
        self.owner, self.number, self.size, self.usage = owner, number, size, usage


class RemoteCompiled:
    """A candidate compiled in the tuning process, and the candidate (whose functions give its
    grids, params and scratch on each call)."""

    __slots__ = ("__weakref__", "kernel", "number")

    def __init__(self, number: int, kernel: Kernel) -> None:
        self.number, self.kernel = number, kernel


class RemoteProfile:
    """A timed pass submitted in the tuning process; ``sequence`` is its launches' in the ledger."""

    __slots__ = ("__weakref__", "number", "sequence")

    def __init__(self, number: int, sequence: int) -> None:
        self.number, self.sequence = number, sequence
