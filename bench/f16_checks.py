"""f16 outputs checked as values on a GPU with ``shader-f16``: how the matmul_f16 family's
candidates compare with each other bit for bit (``output_type="H"``) and as f16 values within
a tolerance (``"e"``), with output checks on, and how far the winner is from a float64
reference rounded to f16 (in ulps where ``|C| >= 1``, and absolutely). Needs a device with
``shader-f16`` (lavapipe has none).

Usage: ``python bench/f16_checks.py``. A benchmark, not a test.
"""

from __future__ import annotations

import numpy as np

from wgtune import Args, Config, Measured, Mismatch, TunableSet, Tuner
from wgtune.backends.native import NativeDevice
from wgtune.kernels.matmul import F16_OUTPUTS, _f16_key, matmul_f16_set

SHAPES = ((1024, 1024, 1024), (333, 517, 1031), (2048, 256, 4096))
CHECKS = {"H (bits)": {"output_type": "H"}, "e (values)": F16_OUTPUTS}


def padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % 4)


def main() -> int:
    device = NativeDevice.open()
    print(device.adapter_info.get("device"), "shader-f16:", "shader-f16" in device.features, flush=True)
    candidates = matmul_f16_set().candidates
    for m, n, k in SHAPES:
        a = np.random.default_rng(1).uniform(-1, 1, (m, k)).astype(np.float16)
        b = np.random.default_rng(2).uniform(-1, 1, (k, n)).astype(np.float16)
        exact = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16)
        for label, check in CHECKS.items():
            tunables = TunableSet(f"matmul_f16 {label}", candidates, _f16_key, outputs=(2,), **check)
            args = Args((device.create_buffer(padded(a.tobytes())), device.create_buffer(padded(b.tobytes())),
                         device.create_buffer(size=len(padded(bytes(2 * m * n))))), (m, n, k))
            tuner = Tuner(device, config=Config(cache=False, log_level="disabled", checks=True))
            winner = tuner.execute(tunables, args)
            results = tuner.results(tunables, tunables.key(args))
            mismatches = [result for result in results if isinstance(result, Mismatch)]
            out = np.frombuffer(device.read_buffer_sync(args.buffers[2])[: 2 * m * n], np.float16).reshape(m, n)
            # In ulps where |C| >= 1 (near zero an ulp is tiny and signs may differ), and absolutely.
            large = np.abs(exact.astype(np.float32)) >= 1
            ulps = np.abs(out.view(np.int16).astype(np.int32) - exact.view(np.int16).astype(np.int32))[large].max()
            error = np.abs(out.astype(np.float64) - exact.astype(np.float64)).max()
            measured = sum(isinstance(result, Measured) for result in results)
            print(f"{m}x{n}x{k} {label}: {measured} measured, {len(mismatches)} mismatched; winner {winner.name} "
                  f"is at most {ulps} ulp from float64 rounded to f16 where |C| >= 1, {error:.2g} absolutely",
                  flush=True)
            for mismatch in mismatches[:3]:
                print(f"    {mismatch.name}: {mismatch.reason[:160]}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
