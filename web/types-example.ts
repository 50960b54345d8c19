// An app's use of wgtune, type-checked against wgtune.d.ts (tests/test_typescript.py runs
// `tsc --noEmit` on it with TypeScript 7.x and 5.x). Not served or run: it shows, and checks,
// what the declarations allow; tests/test_typescript.py also checks that a wrong use is refused.
import {
  anchor, loadWgtune, ConfigError, LaunchRefused, NoValidKernelFound,
  type Batch, type Call, type TunableSetHandle, type Wgtune,
} from "./wgtune.js";

const SOURCE = `
struct Params { n: u32, scale: f32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
override WG: u32 = 64u;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x < p.n) { y[g.x] = p.scale * x[g.x]; }
}`;

type ScaleParams = { n: number; scale: number };

export async function scaleOnce(device: GPUDevice, x: GPUBuffer, y: GPUBuffer, n: number): Promise<string> {
  const wgtune: Wgtune = await loadWgtune({ device, settings: { time_limit: 2, checks: 1 } });
  const scale: TunableSetHandle<ScaleParams> = await wgtune.defineSet<ScaleParams>({
    name: "scale",
    candidates: [64, 128, 256].map((wg) => ({
      name: `wg${wg}`,
      wgsl: SOURCE,
      constants: { WG: wg },
      grid: (call) => [Math.ceil(call.params.n / wg)],
    })),
    key: (call) => ({ n: anchor(call.params.n, { max: 1 << 24 }) }),
    // y = 2 x, one typed array per output, of y's WGSL type (array<f32>).
    reference: (call, inputs) => [new Float32Array(inputs[0].slice().buffer).map((v) => call.params.scale * v)],
  });
  // The device is the lib's GPUDevice (TypeScript 7's DOM lib, or @webgpu/types on 5.x).
  const out = wgtune.device.createBuffer({ size: 4 * n, usage: y.usage });
  const call = { buffers: { x, y: out }, params: { n, scale: 2.0 } };
  if (scale.check(call).state === "Pending") await scale.settle(call, { timeout: 120 });
  wgtune.on((event) => {
    if (event.type === "trial" && event.result.error === "Timeout") console.warn(event.result.reason);
    if (event.type === "finished" && event.warning) console.warn(`${event.judge}: ${event.warning}`);
    if (event.type === "warning") console.warn(event.message);
  });
  try {
    const ran = await scale.execute(call);
    const n: number | string | boolean | null = ran.key.n;
    return `${ran.ran} for n=${n}`;
  } catch (error) {
    if (error instanceof NoValidKernelFound) return error.failures.map((f) => `${f.candidate}: ${f.reason}`).join("; ");
    if (error instanceof LaunchRefused || error instanceof ConfigError) return `${error.name} in ${error.set}: ${error.message}`;
    throw error;
  }
}

/** A key that failed (every candidate), tuned again after the app changed something. */
export async function tunedAgain(scale: TunableSetHandle<ScaleParams>, call: Call<ScaleParams>): Promise<string> {
  const answer = scale.check(call);
  if (answer.state !== "Failed") return answer.winner ?? "pending";
  console.warn(answer.failure?.name, answer.failure?.failures?.map((f) => f.message));
  return (await scale.retune(call)).state;
}

// A two-pass candidate whose partials are scratch the device makes: the call gives x and out only.
export async function twoPassSum(wgtune: Wgtune, pass1: string, pass2: string, n: number): Promise<TunableSetHandle<[number]>> {
  const chunks = Math.ceil(n / 256);
  return wgtune.defineSet<[number]>({
    name: "sum",
    candidates: [{
      name: "two_pass", wgsl: pass1, grid: [chunks],
      scratch: { partials: (call) => 4 * Math.ceil(call.params[0] / 256) },
      then: [{ name: "total", wgsl: pass2, grid: [1], params: () => [chunks] }],
    }],
  });
}

// The demo's sets by label: answers name the key by its label, and execute says what ran.
export async function demoKey(wgtune: Wgtune): Promise<string> {
  const label: string = wgtune.check("matmul", "128x128x128").key;
  const ran = await wgtune.execute("matmul", label);
  const sets = wgtune.catalogue().sets.map((set) => `${set.name}: ${set.keys.length} keys`);
  return `${ran.ran_fallback ? "fallback" : "winner"} ${ran.ran}; ${sets.join(", ")}`;
}

export async function firstStoredKeys(wgtune: Wgtune): Promise<string[]> {
  const page = await wgtune.storedPage({ limit: 10 });
  await wgtune.clearCache({ all: true });
  return page.entries.map((entry) => `${entry.table} ${entry.label}: ${entry.winner_name}`);
}

export async function searchedSpace(wgtune: Wgtune): Promise<string[]> {
  const spaced = await wgtune.defineSet<ScaleParams>({
    name: "spaced",
    space: {
      render: (point) => SOURCE.replace("override WG: u32 = 64u;", `const WG: u32 = ${point.WG}u;`),
      params: { WG: [32, 64, 128, 256] },
      default: { WG: 64 },
      grid: (point, call) => [Math.ceil(call.params.n / Number(point.WG))],
    },
    search: { strategy: "model", candidates: 0.5 },
  });
  return spaced.candidates;
}

// Many small launches in one submission: in a function, or opened and submitted by hand.
export async function scaleMany(wgtune: Wgtune, scale: TunableSetHandle<ScaleParams>, calls: Array<Call<ScaleParams>>):
  Promise<string[]> {
  const answers = await wgtune.batch(() => calls.map((call) => scale.execute(call)));
  const batch: Batch = wgtune.batch();
  for (const call of calls) scale.execute(call);
  if (batch.open) {
    try {
      await batch.submit();
    } catch (error) {
      if (!(error instanceof LaunchRefused)) throw error;  // a buffer destroyed before the submit: named
    }
  }
  await wgtune.dispose();
  return (await Promise.all(answers)).map((answer) => answer.ran);
}
