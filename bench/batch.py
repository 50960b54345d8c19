"""Launches in batches (issue 14): many small launches one by one, in one batch, and on the GPU alone.

For each size, the repo's fma family (``out = alpha * x + b`` over f32, ``kernels/bandwidth.py``,
tuned first) runs ``LAUNCHES`` times as a chain, each launch reading what the one before wrote
(``x -> y``, then ``y -> x``), and the figures are microseconds per launch:

- one by one: ``LAUNCHES`` separate ``tuner.execute`` calls, each its own submission;
- batched: the same calls inside one ``tuner.batch()`` (which submits every 128 launches, so that
  the GPU runs them while the rest are recorded); also how long until the last call returned
  (the CPU's part, with the submissions made on the way);
- GPU: the kernel's own time, one timed pass of ``LAUNCHES`` repeats of one launch, read from GPU
  timestamps where the device has them (else the wall clock around the pass alone: said so);

each from the first call until the queue is done, the median of ``--rounds`` rounds (the three
measured in turn within a round, the order rotating from round to round), and the ratio of batched
to GPU (the issue's target: within 2x) with the submissions each form made (counted at the queue).

With ``--page``, the same in the page (headless Chromium, WebGPU on SwiftShader where there is no
GPU, through ``e2e/harness.py``): a set defined from JavaScript (``wgtune.defineSet``) with the
same WGSL, ``set.execute`` one by one and inside ``wgtune.batch``; the GPU figure there is one
pre-encoded command buffer of ``LAUNCHES`` repeats of one launch made in JavaScript (the winner's
WGSL, pipeline and bind group set once), timed by the wall clock from its submission until
``onSubmittedWorkDone`` (one clock on any adapter, with timestamp queries or without).

Usage: ``python bench/batch.py`` (64K and 1M elements, native: about 20 s on lavapipe);
``--page`` adds the page (about 80 s more on SwiftShader); ``--full`` (for a real GPU) adds 16M
elements and more rounds.
Benchmark figures, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import time
from pathlib import Path
from typing import Any

from wgtune import Args, Config, Hit, Tuner, run_inline
from wgtune.backends.native import NativeDevice
from wgtune.kernels.bandwidth import FMA_VARIANTS, fma_set, fma_wgsl

LAUNCHES = 1000
SIZES = (1 << 16, 1 << 20)
FULL_SIZES = (1 << 16, 1 << 20, 1 << 24)
ALPHA = 0.5  # x -> 0.5 x + 1 stays bounded over any number of launches
PAGE_VARIANTS = FMA_VARIANTS[:1] + FMA_VARIANTS[6:8]  # f32 and vec4 by one: a short tune on SwiftShader


class CountingQueue:
    """A wgpu-py queue that counts submissions and passes everything on (``WgpuShim`` submits
    through ``shim.queue``; waits and reads go through the real queue and are not counted)."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue
        self.submissions = 0

    def submit(self, command_buffers: list) -> None:
        self.submissions += 1
        self.queue.submit(command_buffers)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.queue, name)


def native(sizes: tuple[int, ...], launches: int, rounds: int) -> list[dict]:
    device = NativeDevice.open()
    queue = device.shim.queue = CountingQueue(device.shim.queue)
    tuner = Tuner(device, config=Config(log_level="disabled", cache=False))
    return [native_size(tuner, queue, n, launches, rounds) for n in sizes]


def native_size(tuner: Tuner, queue: CountingQueue, n: int, launches: int, rounds: int) -> dict:
    device, fma = tuner.device, fma_set()
    x = device.create_buffer(struct.pack(f"<{n}f", *([1.0] * n)))
    b = device.create_buffer(struct.pack(f"<{n}f", *([1.0] * n)))
    y = device.create_buffer(size=4 * n)
    chain = (Args((x, b, y), (n, ALPHA)), Args((y, b, x), (n, ALPHA)))
    winner = tuner.execute(fma, chain[0])  # tunes
    tuner.execute(fma, chain[1])
    state = tuner.fastest(fma, tuner.key(fma, chain[0]))
    assert isinstance(state, Hit), state
    pipeline = run_inline(tuner.pipelines.compile(fma, state.index))

    def sync() -> None:
        run_inline(device.sync())

    def one_by_one() -> dict:
        sync()
        before, started = queue.submissions, time.perf_counter()
        for i in range(launches):
            tuner.execute(fma, chain[i & 1])
        sync()
        return {"seconds": time.perf_counter() - started, "submissions": queue.submissions - before}

    def batched() -> dict:
        sync()
        before, started = queue.submissions, time.perf_counter()
        with tuner.batch():
            for i in range(launches):
                tuner.execute(fma, chain[i & 1])
            recorded = time.perf_counter()
        sync()
        return {"seconds": time.perf_counter() - started, "recording": recorded - started,
                "submissions": queue.submissions - before}

    def gpu() -> dict:
        sync()
        timed = run_inline(device.profile(pipeline, chain[0], winner.grid(chain[0]), launches))
        return {"seconds": run_inline(device.resolve(timed))}

    figures = measure_rounds({"one_by_one": one_by_one, "batched": batched, "gpu": gpu}, rounds)
    return row("native", device.identity.device, n, winner.name, launches, figures,
               "GPU timestamps" if device.timestamps else "wall clock around the pass")


def measure_rounds(forms: dict, rounds: int) -> dict[str, dict]:
    """Each form's figures, the median over ``rounds``, the forms' order rotating by round."""
    names = list(forms)
    seen: dict[str, list[dict]] = {name: [] for name in names}
    for round_ in range(rounds):
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            seen[name].append(forms[name]())
    return {name: {field: statistics.median(figure[field] for figure in figures) for field in figures[0]}
            for name, figures in seen.items()}


def row(world: str, device: str, n: int, winner: str, launches: int, figures: dict, clock: str) -> dict:
    per = {name: {field: value / launches if field in ("seconds", "recording") else value
                  for field, value in figure.items()} for name, figure in figures.items()}
    return {"world": world, "device": device, "n": n, "winner": winner, "clock": clock, **per}


# -- the page -------------------------------------------------------------------------------

PAGE_RUN = r"""
async ({ variants, n, launches, rounds, alpha }) => {
  const api = window.wgtune;
  const device = api.device;
  const grid = (elements) => {
    const groups = Math.ceil(n / elements);
    return groups <= 32768 ? [groups] : [32768, Math.ceil(groups / 32768)];
  };
  const set = await api.defineSet({
    name: `bench_batch_fma_${n}`, key: () => ({ n }),
    candidates: variants.map((v) => ({ name: v.name, wgsl: v.wgsl, grid: () => grid(v.elements) })),
  });
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const filled = () => {
    const buffer = device.createBuffer({ size: 4 * n, usage });
    device.queue.writeBuffer(buffer, 0, new Float32Array(n).fill(1));
    return buffer;
  };
  const [x, b, y] = [filled(), filled(), filled()];
  const chain = [{ buffers: [x, b, y], params: [n, alpha] }, { buffers: [y, b, x], params: [n, alpha] }];
  set.check(chain[0]);
  await set.settle(chain[0], { timeout: 900 });
  const winner = (await set.execute(chain[0])).ran;
  await set.execute(chain[1]);

  // The GPU's own time: repeats of one launch in one command buffer made here, pipeline and bind group set once.
  const chosen = variants.find((v) => v.name === winner);
  const pipeline = device.createComputePipeline({
    layout: "auto", compute: { module: device.createShaderModule({ code: chosen.wgsl }), entryPoint: "main" } });
  const params = new ArrayBuffer(16);
  new Uint32Array(params, 0, 1)[0] = n;
  new Float32Array(params, 4, 1)[0] = alpha;
  const uniform = device.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(uniform, 0, params);
  const group = (input, output) => device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [
    input, b, output, uniform].map((buffer, binding) => ({ binding, resource: { buffer } })) });
  const groups = [group(x, y)];
  const [gx, gy = 1] = grid(chosen.elements);

  let submissions = 0;
  const submit = device.queue.submit;
  device.queue.submit = (buffers) => { submissions++; return submit.call(device.queue, buffers); };
  const done = () => device.queue.onSubmittedWorkDone();
  const forms = {
    one_by_one: async () => {
      await done();
      const [before, started] = [submissions, performance.now()];
      for (let i = 0; i < launches; i++) set.execute(chain[i & 1]);
      await done();
      return { seconds: (performance.now() - started) / 1000, submissions: submissions - before };
    },
    batched: async () => {
      await done();
      const [before, started] = [submissions, performance.now()];
      let recorded;
      api.batch(() => {
        for (let i = 0; i < launches; i++) set.execute(chain[i & 1]);
        recorded = performance.now();
      });
      await done();
      return { seconds: (performance.now() - started) / 1000, recording: (recorded - started) / 1000,
               submissions: submissions - before };
    },
    gpu: async () => {
      const encoder = device.createCommandEncoder();
      const pass = encoder.beginComputePass();
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, groups[0]);
      for (let i = 0; i < launches; i++) pass.dispatchWorkgroups(gx, gy);
      pass.end();
      const commands = encoder.finish();
      await done();
      const started = performance.now();
      submit.call(device.queue, [commands]);
      await done();
      return { seconds: (performance.now() - started) / 1000 };
    },
  };
  const names = Object.keys(forms);
  const seen = Object.fromEntries(names.map((name) => [name, []]));
  for (let round = 0; round < rounds; round++) {
    for (const name of [...names.slice(round % 3), ...names.slice(0, round % 3)]) seen[name].push(await forms[name]());
  }
  delete device.queue.submit;
  return { winner, seen, adapter: api.adapterInfo };
}
"""


def page(sizes: tuple[int, ...], launches: int, rounds: int) -> list[dict]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
    import tempfile

    from harness import PageServer, launch, wait_ready
    from playwright.sync_api import sync_playwright

    variants = [{"name": v.name, "wgsl": fma_wgsl(v), "elements": v.elements_per_workgroup} for v in PAGE_VARIANTS]
    rows = []
    with PageServer() as server, sync_playwright() as playwright, \
            tempfile.TemporaryDirectory(prefix="wgtune-bench-") as profile:
        context = launch(playwright, Path(profile))
        try:
            tab = context.new_page()
            tab.set_default_timeout(1_200_000)
            tab.goto(server.url)
            wait_ready(tab)
            for n in sizes:
                answer = tab.evaluate(PAGE_RUN, {"variants": variants, "n": n, "launches": launches,
                                                 "rounds": rounds, "alpha": ALPHA})
                figures = {name: {field: statistics.median(figure[field] for figure in seen)
                                  for field in seen[0]} for name, seen in answer["seen"].items()}
                adapter = answer["adapter"]
                name = adapter.get("description") or adapter.get("architecture") or adapter.get("vendor") or "?"
                rows.append(row("page", f"Chromium, {name}", n, answer["winner"], launches, figures,
                                "wall clock around one pre-encoded command buffer"))
        finally:
            context.close()
    return rows


def report(rows: list[dict], launches: int) -> None:
    print(f"{'world':6} {'elements':>9} {'winner':18} {'one by one':>11} {'batched':>9} {'(to record)':>11} "
          f"{'GPU':>9} {'batched/GPU':>11} {'submissions':>13}")
    for r in rows:
        one, batched, gpu = r["one_by_one"], r["batched"], r["gpu"]
        print(f"{r['world']:6} {r['n']:>9} {r['winner']:18} {one['seconds'] * 1e6:>8.1f} us "
              f"{batched['seconds'] * 1e6:>6.1f} us {batched['recording'] * 1e6:>8.1f} us "
              f"{gpu['seconds'] * 1e6:>6.1f} us {batched['seconds'] / gpu['seconds']:>10.2f}x "
              f"{int(one['submissions']):>6} / {int(batched['submissions'])}")
    print(f"\nper launch, {launches} launches; submissions: one by one / batched. Devices and GPU clocks:")
    for world, device, clock in dict.fromkeys((r["world"], r["device"], r["clock"]) for r in rows):
        print(f"  {world}: {device}; GPU time from {clock}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="adds 16M elements and more rounds (a real GPU)")
    parser.add_argument("--page", action="store_true", help="also in the page (headless Chromium)")
    parser.add_argument("--launches", type=int, default=LAUNCHES)
    parser.add_argument("--rounds", type=int, default=None, help="rounds per figure (default 3, 7 with --full)")
    args = parser.parse_args()
    sizes = FULL_SIZES if args.full else SIZES
    rounds = args.rounds or (7 if args.full else 3)
    print(f"launches in batches: {args.launches} launches of fma (out = {ALPHA} x + b, f32), "
          f"median of {rounds} rounds")
    rows = native(sizes, args.launches, rounds)
    if args.page:
        rows += page(SIZES, args.launches, rounds)
    report(rows, args.launches)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
