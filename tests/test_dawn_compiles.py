"""On Dawn no call leaves the calling thread: wgpudawn raises an error at whichever call looks
next, on any thread, so a compile on a worker thread failed another compile or the tune's wait for
the queue (CI, once in three runs: a set's wrong override failed the whole tune). Its pipelines
compile in parallel through ``create_compute_pipeline_async`` instead, each error coming back
with its own promise (``backends/dawn_shim.py``)."""

from __future__ import annotations

from dawn_null import dawn_null_report

MANY_COMPILES = r"""
import json
import threading

from wgtune import Kernel
from wgtune.backends import wgpu_shim
from wgtune.backends.dawn import DawnDevice
from wgtune.errors import KernelError
from wgtune.runner import run_inline

device = DawnDevice.open()
kernels = []
for index in range(36):
    size = 0 if index % 3 == 1 else 64  # every third a workgroup size Tint refuses
    kernels.append(Kernel(f"k{index}", f"// k{index}\n@compute @workgroup_size({size or 'WG'}) fn main() {{}}\n"
                          + ("override WG: u32 = 0;\n" if not size else ""), grid=lambda args: (1, 1, 1)))
threads = threading.active_count()
device.start_compiles(kernels[:12])  # begun ahead, taken by the compile below
run_inline(device.sync())  # the queue's wait meanwhile: none of the compiles' errors is its
compiled = run_inline(device.compile_many(kernels[:30]))
alone = [run_inline(device.compile(kernel)) if index % 3 != 1 else None for index, kernel in enumerate(kernels[30:])]
try:
    run_inline(device.compile(kernels[31]))
    single = "compiled"
except KernelError as error:
    single = str(error)
report = {
    "width": device.compile_width, "cores": wgpu_shim.COMPILE_THREADS, "pool": device.shim._compilers is not None,
    "threads_made": threading.active_count() - threads, "started_left": len(device.shim._started),
    "answers": [type(c).__name__ + (":" + str(c) if isinstance(c, KernelError) else "") for c in compiled],
    "alone": [type(c).__name__ for c in alone if c is not None], "single": single,
}
print("REPORT " + json.dumps(report))
"""


def test_on_dawn_compiles_stay_on_the_calling_thread_and_each_error_is_its_own_kernels():
    report = dawn_null_report(MANY_COMPILES)
    assert report["width"] == report["cores"]  # a queue as deep as the threads' keeps Dawn's two workers fed
    assert not report["pool"] and report["threads_made"] == 0 and report["started_left"] == 0
    for index, answer in enumerate(report["answers"]):
        if index % 3 == 1:
            assert answer.startswith("KernelError:") and f"k{index}" in answer, (index, answer)
        else:
            assert answer == "CompiledKernel", (index, answer)
    assert report["alone"] == ["CompiledKernel"] * 4
    assert "workgroup_size" in report["single"] and "k31" in report["single"]
