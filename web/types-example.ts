// An app's use of wgtune, type-checked against wgtune.d.ts (tests/test_typescript.py runs
// `tsc --noEmit` on it). Not served or run: it shows, and checks, what the declarations allow.
import { loadWgtune, type Batch, type Call, type TunableSetHandle, type Wgtune } from "./wgtune.js";

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

export async function scaleOnce(device: GPUDevice, x: GPUBuffer, y: GPUBuffer, n: number): Promise<string> {
  const wgtune: Wgtune = await loadWgtune({ device, settings: { time_limit: 2, checks: 1 } });
  const scale: TunableSetHandle = await wgtune.defineSet({
    name: "scale",
    candidates: [64, 128, 256].map((wg) => ({
      name: `wg${wg}`,
      wgsl: SOURCE,
      constants: { WG: wg },
      grid: (call) => [Math.ceil(n / wg)],
    })),
    key: (call) => ({ n, bytes: Array.isArray(call.buffers) ? call.buffers[0] : call.buffers.x }),
    // y = 2 x, one typed array per output, of y's WGSL type (array<f32>).
    reference: (call, inputs) => [new Float32Array(inputs[0].slice().buffer).map((v) => 2 * v)],
  });
  const call = { buffers: { x, y }, params: { n, scale: 2.0 } };
  if (scale.check(call).state === "Pending") await scale.settle(call, { timeout: 120 });
  const ran = await scale.execute(call);
  wgtune.on((event) => {
    if (event.type === "trial" && event.result.error === "Timeout") console.warn(event.result.reason);
    if (event.type === "finished" && event.warning) console.warn(`${event.judge}: ${event.warning}`);
  });
  return ran.ran;
}

// A two-pass candidate whose partials are scratch the device makes: the call gives x and out only.
export async function twoPassSum(wgtune: Wgtune, pass1: string, pass2: string, n: number): Promise<TunableSetHandle> {
  const chunks = Math.ceil(n / 256);
  return wgtune.defineSet({
    name: "sum",
    candidates: [{
      name: "two_pass", wgsl: pass1, grid: [chunks],
      scratch: { partials: (call) => 4 * Math.ceil(Number(Array.isArray(call.params) ? call.params[0] : n) / 256) },
      then: [{ name: "total", wgsl: pass2, grid: [1], params: () => [chunks] }],
    }],
  });
}

export async function firstStoredKeys(wgtune: Wgtune): Promise<string[]> {
  const page = await wgtune.storedPage({ limit: 10 });
  return page.entries.map((entry) => `${entry.table} ${entry.label}: ${entry.winner_name}`);
}

export async function searchedSpace(wgtune: Wgtune): Promise<string[]> {
  const spaced = await wgtune.defineSet({
    name: "spaced",
    space: {
      render: (point) => SOURCE.replace("override WG: u32 = 64u;", `const WG: u32 = ${point.WG}u;`),
      params: { WG: [32, 64, 128, 256] },
      default: { WG: 64 },
      grid: (point, call) => [Math.ceil(Number((call.params as Record<string, number>).n) / Number(point.WG))],
    },
    search: { strategy: "model", candidates: 0.5 },
  });
  return spaced.candidates;
}

// Many small launches in one submission: in a function, or opened and submitted by hand.
export async function scaleMany(wgtune: Wgtune, scale: TunableSetHandle, calls: Call[]): Promise<string[]> {
  const answers = wgtune.batch(() => calls.map((call) => scale.execute(call)));
  const batch: Batch = wgtune.batch();
  for (const call of calls) scale.execute(call);
  if (batch.open) batch.submit();
  return (await Promise.all(answers)).map((answer) => answer.ran);
}
