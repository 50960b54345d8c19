"""Launches in batches: many calls recorded into a command buffer and submitted together.

Each :meth:`Tuner.execute <wgtune.Tuner.execute>` on its own is one command buffer and one
submission, which costs far more than a small kernel: on an H200 through wgpu-py, 1000 launches
of an fma over 1M floats took 48 us each one by one and 7.6 us in a batch, against 3.4 us of
the GPU's own time (``bench/batch.py``). A batch records them into one::

    with tuner.batch():
        for layer in layers:
            tuner.execute(layer.set, layer.args)     # recorded, in order; not submitted yet
    # submitted here

    batch = tuner.batch()                            # or by hand (the page's form)
    ...
    batch.submit()

The batch is the device's (:meth:`Device.begin_batch <wgtune.Device.begin_batch>`): what a
launch binds and which kernel runs are decided as without one, so the hit path stays a dict
lookup. A device may submit a long batch part by part, so that the GPU runs the first launches
while the next are recorded (``WebGPUDevice``: every 128 launches). Order is kept: whatever
else reaches the GPU meanwhile (a tune on a miss, a read, a sync, a copy, a timed pass) first
submits what the batch recorded so far, then the batch goes on. A batch opened inside another
joins it (submitted at the outer end). An exception in a ``with`` block still submits the
launches recorded before it: they were returned to the caller as executed.

A launch the GPU refuses spoils the submission it is in: batched, its error raises at the submit
and the launches recorded with it are lost too (in a browser WebGPU says so only later: the
page's ``batch.submit()`` answers a promise of it, ``backends/js_batch.py``). A device that cannot
batch (a third party's that keeps :class:`~wgtune.gpu.device.Device`'s defaults) submits each
launch at once: correct, not batched.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

from .errors import WgtuneError

if TYPE_CHECKING:
    from .gpu.device import Device

__all__ = ["Batch"]


class Batch:
    """Launches on ``device`` recorded from now until :meth:`submit` (or the end of a ``with``
    block), then submitted as one. Made by :meth:`Tuner.batch <wgtune.Tuner.batch>`."""

    __slots__ = ("_open", "device")

    def __init__(self, device: Device) -> None:
        device.begin_batch()
        self.device = device
        self._open = True

    @property
    def open(self) -> bool:
        """Whether launches are still being recorded into this batch."""
        return self._open

    def submit(self) -> None:
        """Submit what the batch recorded and close it (for a batch inside another: leave it to
        the outer one). A WgtuneError when it was submitted already."""
        if not self._open:
            raise WgtuneError("this batch was submitted already: open a new one with tuner.batch()")
        self._open = False  # closed even if the submission raises: its launches are spent either way
        self.device.end_batch()

    def __enter__(self) -> Batch:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._open:
            self.submit()
