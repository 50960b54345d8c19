"""torch's time for the same work, the baseline every bench figure is read against.

Two ways, since issue 29: ``plain`` (:func:`cuda_seconds`), a Python loop of launches between
CUDA events, as a program calls torch; and ``graph`` (:func:`cuda_graph_seconds`), the launches
captured in a CUDA graph and replayed, the GPU's own time without a Python launch each, the
strongest baseline for short kernels. Where torch is missing or sees no CUDA GPU, ``CUDA`` is
False and the benches leave torch's columns out.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any, NamedTuple

try:  # torch is optional: the side-by-side column appears where it has a GPU
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

__all__ = ["CUDA", "TorchSeconds", "cuda_graph_seconds", "cuda_seconds", "torch", "torch_seconds"]

CUDA = torch is not None and torch.cuda.is_available()


def cuda_seconds(run: Callable[[], Any], samples: int = 10) -> float:
    """Median seconds of ``run`` on the GPU: CUDA events around enough repeats for 1 ms."""

    def timed(repeats: int) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeats):
            run()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1000

    run()
    torch.cuda.synchronize()
    repeats = 1
    while timed(repeats) < 1e-3 and repeats < 4096:
        repeats *= 4
    return statistics.median(timed(repeats) / repeats for _ in range(samples))


def _replayed_seconds(graph: Any) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1000


def _captured(run: Callable[[], Any], repeats: int) -> Any:
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        run()  # a warm-up on a side stream before capture, as torch's docs ask
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(graph):
        for _ in range(repeats):
            run()
    return graph


def cuda_graph_seconds(run: Callable[[], Any], samples: int = 10) -> float:
    """Median seconds of ``run`` captured in a CUDA graph of enough repeats for 1 ms, the graph
    replayed between CUDA events: the GPU's own time, without a Python launch each (issue 29's
    strongest baseline for short kernels)."""
    repeats = 1
    graph = _captured(run, repeats)
    _replayed_seconds(graph)
    while _replayed_seconds(graph) < 1e-3 and repeats < 4096:
        repeats *= 4
        graph = _captured(run, repeats)
        _replayed_seconds(graph)
    return statistics.median(_replayed_seconds(graph) / repeats for _ in range(samples))


class TorchSeconds(NamedTuple):
    """torch's seconds a run: ``plain`` (a Python loop of launches, :func:`cuda_seconds`) and
    ``graph`` (:func:`cuda_graph_seconds`; None where a graph could not be captured)."""

    plain: float
    graph: float | None

    def scaled(self, factor: float) -> TorchSeconds:
        return TorchSeconds(self.plain * factor, self.graph * factor if self.graph is not None else None)


def torch_seconds(run: Callable[[], Any]) -> TorchSeconds:
    """``run`` timed both ways."""
    plain = cuda_seconds(run)
    try:
        graph = cuda_graph_seconds(run)
    except RuntimeError:  # an op that cannot be captured: the plain figure stands alone
        graph = None
    return TorchSeconds(plain, graph)
