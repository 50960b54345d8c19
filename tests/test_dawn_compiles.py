"""On Dawn every compile stays on the calling thread: wgpudawn raises an error at whichever call
looks next, on any thread, so a compile on a worker thread failed another compile or the tune's
wait for the queue (CI, once in three runs: a set's wrong override failed the whole tune)."""

from __future__ import annotations

from dawn_null import dawn_null_report

MANY_COMPILES = r"""
import json

from wgtune import Kernel
from wgtune.backends.dawn import DawnDevice
from wgtune.errors import KernelError
from wgtune.runner import run_inline

device = DawnDevice.open()
kernels = []
for index in range(24):
    size = 0 if index % 3 == 1 else 64  # every third a workgroup size Tint refuses
    kernels.append(Kernel(f"k{index}", f"// k{index}\n@compute @workgroup_size({size or 'WG'}) fn main() {{}}\n"
                          + ("override WG: u32 = 0;\n" if not size else ""), grid=lambda args: (1, 1, 1)))
device.start_compiles(kernels[:12])
run_inline(device.sync())  # the queue's wait meanwhile: none of the compiles' errors is its
compiled = run_inline(device.compile_many(kernels))
report = {
    "threads": getattr(device.shim, "compile_threads", None), "background": device.background_compiles,
    "width": device.compile_width, "pool": device.shim._compilers is not None,
    "answers": [type(c).__name__ + (":" + str(c) if isinstance(c, KernelError) else "") for c in compiled],
}
print("REPORT " + json.dumps(report))
"""


def test_on_dawn_compiles_stay_on_the_calling_thread_and_each_error_is_its_own_kernels():
    report = dawn_null_report(MANY_COMPILES)
    assert report["threads"] == report["width"] == 1 and report["background"] == 0
    assert not report["pool"]
    for index, answer in enumerate(report["answers"]):
        if index % 3 == 1:
            assert answer.startswith("KernelError:") and f"k{index}" in answer, (index, answer)
        else:
            assert answer == "CompiledKernel", (index, answer)
