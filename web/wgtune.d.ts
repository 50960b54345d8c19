// TypeScript declarations of wgtune's JavaScript API (web/wgtune.js, web/sets.js, web/errors.js).
// Checked by tests/test_typescript.py with TypeScript 7.x and 5.x, with and without @webgpu/types:
// `tsc --noEmit` on web/types-example.ts and on the guides' ```ts snippets.
//
// No reference to @webgpu/types: TypeScript 7's DOM lib declares WebGPU itself, and pulling the
// package in beside it is ~180 duplicate identifiers. GPUDevice and GPUBuffer are taken from
// whichever lib declares them (TypeScript's DOM lib, or @webgpu/types on TypeScript 5.x).

/** The instances of the global WebGPU class `Name` where a lib declares it, else `object`. */
type WebGPUType<Name extends string> =
  typeof globalThis extends { [K in Name]: { prototype: infer T } } ? T : object;
/** `GPUDevice` from the DOM lib or @webgpu/types (`object` on TypeScript 5.x without @webgpu/types). */
export type WgtuneGPUDevice = WebGPUType<"GPUDevice">;
/** `GPUBuffer` from the DOM lib or @webgpu/types (`object` on TypeScript 5.x without @webgpu/types). */
export type WgtuneGPUBuffer = WebGPUType<"GPUBuffer">;

// -- errors (web/errors.js; each error's `name` is its class's name) -------------------------

/** Why wgtune cannot run in this browser, with what to do about it. */
export declare class WgtuneUnavailable extends Error {
  advice: string;
}
/** The value of a key field. */
export type KeyValue = number | string | boolean | null;
/** Base of every error wgtune throws on purpose; `set` and `key` name the set and key where known. */
export declare class WgtuneError extends Error {
  set?: string;
  /**
   * The one key the error concerns, as its fields (`{n: 1024}`; a registered key's too, not its
   * label): a call's once its key is known (a launch refused, no valid kernel, a settle's timeout).
   * Absent (`undefined`) where the error concerns no one key: a set's definition, a call refused
   * before its key is known (a bad param, the app's key function failing), a batch, an import.
   */
  key?: Record<string, KeyValue>;
}
/** A setting, a set's description or a call is wrong; `field` names the field or param to blame. */
export declare class ConfigError extends WgtuneError {
  field?: string;
}
/** A candidate could not be compiled or launched. */
export declare class KernelError extends WgtuneError {}
/** WebGPU refused the launch: a buffer without STORAGE usage, too small, destroyed, another device's; a grid over a limit. */
export declare class LaunchRefused extends KernelError {}
/** A stored, imported or bundled document is not wgtune's, or is damaged. */
export declare class StoreError extends WgtuneError {}
/** A tune stopped for a reason outside any one candidate. */
export declare class TuneFailed extends WgtuneError {}
/** The GPU device was lost. */
export declare class DeviceLost extends WgtuneError {}
/** Every candidate failed for the key: why, for each. The key stays Failed until its set changes or `retune`. */
export declare class NoValidKernelFound extends WgtuneError {
  failures: CandidateFailure[];
}
/** The names of wgtune's error classes (a failure's `name`). */
export type WgtuneErrorName = "WgtuneError" | "ConfigError" | "KernelError" | "LaunchRefused" | "StoreError" |
  "TuneFailed" | "DeviceLost" | "NoValidKernelFound";
/** Why a candidate failed ("Compile": the WGSL compiler's message). */
export type FailureReason = "Compile" | "Launch" | "Mismatch" | "Timeout" | "InvalidSamples" | "Unknown" | "Skip";
export interface CandidateFailure { candidate: string; reason: FailureReason; message: string }
/** An answer's failure: the error a call would throw, as data (its class's name and fields). */
export interface Failure {
  name: WgtuneErrorName | (string & {}); message: string; failures?: CandidateFailure[];
  set?: string; key?: Record<string, KeyValue>; field?: string;
}
/** `x` (a whole number >= 0) rounded up to a power of `base` (default 2), clamped to [min, max]: Python's `wgtune.anchor`. */
export declare function anchor(x: number, options?: { max?: number; min?: number; base?: number }): number;

// -- loading ---------------------------------------------------------------------------------

/** How tunes sample, named as the WGTUNE_* variables are natively, in lower case. */
export interface TuneSettings {
  policy?: "adaptive" | "fixed";
  budget?: number; screen_budget?: number; max_samples?: number; tolerance?: number; confidence?: number;
  warmups?: number; samples?: number; min_sample?: number;
  /** Seconds one launch of a candidate may take before it is a Timeout result. */
  time_limit?: number;
  /**
   * Output checks (default on): every candidate's outputs are compared, on the GPU, with the
   * set's reference or, without one, with the other candidates'; a wrong one is a Mismatch and
   * never wins. 0 (or false) turns them off: then a fast wrong candidate can win.
   */
  checks?: 0 | 1 | boolean;
  /**
   * Seconds a tune may spend bringing an idle GPU's clock up before it samples (default 1; 0: sample
   * at whatever clock it is at). Not on a fallback adapter (SwiftShader), whose clock is the host's.
   */
  wake?: number;
}
export interface LoadOptions {
  /** The GPUDevice to tune on (default: wgtune opens the high-performance adapter's). */
  device?: WgtuneGPUDevice | null;
  /** Loading progress, as text. */
  onStatus?: (text: string) => void;
  /** Tune progress and device events. */
  onEvent?: (event: WgtuneEvent) => void;
  /** The IndexedDB database name (default "wgtune"). */
  database?: string;
  settings?: TuneSettings;
  /** Where wgtune's assets (wgtune-config.json, the wheel, the worker) are served from (default: beside wgtune.js). */
  baseUrl?: string | URL;
  /** Where Pyodide's files are served from (default: pyodide/ under baseUrl). */
  pyodideUrl?: string | URL;
  /** Register the demo's sets and keys (the demo page does; a library user need not). */
  demo?: boolean;
  /**
   * Start Pyodide with WebAssembly stack switching (JSPI), for Python of your own that blocks on
   * promises (`run_sync`, `asyncio.run`). Default false: Chromium's renderer can crash on Python's
   * JSPI stacks, and wgtune does not need them.
   */
  stackSwitching?: boolean;
}
/** What `adapterInfo` says of the device. */
export interface AdapterInfo {
  vendor: string; architecture: string; device: string; description: string; isFallbackAdapter: boolean;
  /** Whether tunes time on the GPU's timestamps (else on the wall clock, of ~ms grain). */
  timestampQuery: boolean;
  features: string[];
}

// -- events ----------------------------------------------------------------------------------

/** A candidate's result: its timing, or its failure with the reason. */
export interface CandidateResult {
  name: string;
  /** Present on a timing (not on a failure). */
  index?: number;
  timing?: string;
  /** Seconds per dispatch. */
  median?: number; min?: number; max?: number; mean?: number; variance?: number; score?: number;
  samples?: number[];
  eliminated_early?: boolean;
  /** Compiled and run, not timed (a dry run). */
  dry_run?: boolean;
  error?: Exclude<FailureReason, "Compile">;
  reason?: string;
}
/** How sure a tune is of its winner against the runner-up. */
export interface Confidence {
  runner_up: string;
  /** The runner-up's time over the winner's, and its interval at `level`. */
  ratio: number; low: number; high: number; level: number;
  /** The probability that the winner is the faster. */
  p_faster: number;
  /** The winner's and the runner-up's sample counts. */
  samples: [number, number];
}
/**
 * Events name the set and its key as text: a registered key by its label ("128x128x128"), a
 * defineSet key by its fields as `field=value`, sorted by field and joined by ", "
 * ("dtype=f32, n=1024"). Answers (check, execute, settle) carry a defineSet key as an object.
 */
export type WgtuneEvent =
  | { type: "pending"; set: string; key: string }
  | { type: "started"; set: string; key: string; candidates: number }
  | { type: "trial"; set: string; key: string; index: number; result: CandidateResult; wall: number }
  | { type: "finished"; set: string; key: string; winner: string; stored: boolean | "pending";
      confidence: Confidence | null;
      /** The candidate that met the short-circuit limit (the others not run), or null. */
      short_circuit: string | null;
      /** Who said which outputs are right: the set's reference, the candidates' agreement, or "" (unchecked). */
      judge?: "reference" | "agreement" | "";
      /** Candidate 0 gave a wrong answer here, so the next candidate is the fallback from now on; else null. */
      warning?: string | null;
      /** Another tab tuned it (no tune ran here); announced: heard as it stored it, not waited for. */
      elsewhere?: boolean; announced?: boolean }
  | { type: "failed"; set: string; key: string; reason: string }
  | { type: "record"; record: RecordItem }
  | { type: "stored"; set: string; table: string; key: string; ok: boolean; reason: string | null }
  /** The key's stored winner is gone: a clear here, or in another tab (`elsewhere`); its records say "cleared". */
  | { type: "cleared"; set: string; table: string; key: string; elsewhere: boolean }
  /** The app's device lacks timestamp-query: timings fall back to the wall clock. */
  | { type: "warning"; message: string }
  | { type: "device-lost"; reason: string; message: string }
  | { type: "device-reopened"; retuning: string[] }
  | { type: "device-gone"; reason: string };
/** One tune's record (`records()`, the `record` event). */
export interface RecordItem {
  kind: string;
  effect: "changed" | "observed";
  /** When, in Unix seconds. */
  at: number;
  /** The key as events name it. */
  label: string;
  record: {
    table: string; entry: { key: Record<string, KeyValue>; checksum: string }; winner: number;
    trials: Array<{ name: string; wall: number; samples: number }>;
    short_circuit: string | null; wall: number; dry_run: boolean;
    /** "pending" while IndexedDB writes it; "cleared" once a clear (here or in another tab) took it. */
    stored: boolean | "pending" | "cleared"; policy: string;
    confidence: Confidence | null; warning?: string;
  };
}

// -- sets defined from JavaScript ------------------------------------------------------------

/** A number or nested numbers (a vector field, an array field). */
export type ParamValue = number | ParamValue[];
/** A call's params: by the uniform struct's field names, or in order. */
export type Params = Record<string, ParamValue> | ParamValue[];
/** The constraint of a set's params type: `{n: number; alpha: number}`, `[number, number]`, ... */
export type ParamsOf<P> = { [K in keyof P]: ParamValue };
/**
 * One call of a set: the app's own buffers, by the WGSL's variable names or in binding order,
 * and the params of its uniform, by the uniform struct's field names (`P`) or in order. Each
 * param is packed as the WGSL declares it (a 2.0 fills an f32 as 2.0).
 */
export interface Call<P extends ParamsOf<P> = Params> {
  buffers: Record<string, WgtuneGPUBuffer> | WgtuneGPUBuffer[];
  /** Optional only where the WGSL reads no uniform from them: else a ConfigError names what is missing. */
  params?: P | ParamValue[];
}
/**
 * What a set's functions see of a call (also of the benchmark's copies of it): its params (by
 * name when the uniform is a struct: type them with `defineSet<{n: number}>`), and each
 * buffer's size in bytes.
 */
export interface CallView<P extends ParamsOf<P> = Params> {
  params: P;
  buffers: Record<string, number> | number[];
}
/** Workgroup counts: [x], [x, y] or [x, y, z]. */
export type Grid = [number] | [number, number] | [number, number, number];
/** The autotune key: calls with equal keys share one tune and one winner. */
export type Key = Record<string, KeyValue>;
export interface Candidate<P extends ParamsOf<P> = Params> {
  name: string;
  wgsl: string;
  grid: ((call: CallView<P>) => Grid) | Grid;
  entryPoint?: string;
  /** Values of the WGSL's `override` constants, by name or numeric @id. */
  constants?: Record<string, number | boolean>;
  workgroupSize?: [number, number, number]; workgroupStorage?: number;
  /** WebGPU features the WGSL needs ("shader-f16", "subgroups"). */
  features?: string[];
  priority?: number;
  /** This stage's own uniform values, when they are not the call's params. */
  params?: (call: CallView<P>) => ParamValue[];
  /** Further stages, dispatched after this one in the same pass (a two-pass reduction). */
  then?: Array<Omit<Candidate<P>, "scratch">>;
  /**
   * Workspace buffers the device makes for each call (the app gives none), by the WGSL name its
   * stages declare them under: bytes, or a function of the call. Contents undefined at each launch.
   */
  scratch?: Record<string, number | ((call: CallView<P>) => number)>;
  /**
   * "declared": the stage's pipeline layout is every buffer its WGSL declares in group 0, used or
   * not, so that stages declaring the same bindings share one bind group (set once a launch).
   */
  layout?: "auto" | "declared";
}
/** A point of a parameter space: parameter name -> value. */
export type Point = Record<string, number | string | boolean>;
/** One source (or a renderer) and lists of parameter values: one candidate per admitted point. */
export interface Space<P extends ParamsOf<P> = Params> {
  name?: string;
  /** WGSL whose `override` declarations take the parameters of the same names. */
  source?: string;
  /** Or: the WGSL of one point (any template engine). */
  render?: (point: Point) => string;
  params: Record<string, Array<number | string | boolean>>;
  /** Your configuration: candidate 0, the fallback. */
  default: Point;
  grid: (point: Point, call: CallView<P>) => Grid;
  restrict?: (point: Point) => boolean;
  constants?: (point: Point) => Record<string, number | boolean>;
  workgroupSize?: ((point: Point) => [number, number, number]) | [number, number, number];
  entryPoint?: string; features?: string[];
}
/** One output of a reference: of the output's WGSL element type (Float32Array for array<f32>). */
export type ReferenceOutput = Float32Array | Float64Array | Int32Array | Uint32Array | Int16Array | Uint16Array |
  Int8Array | Uint8Array | ArrayBuffer | number[];
export interface SetSpec<P extends ParamsOf<P> = Params> {
  name: string;
  candidates?: Array<Candidate<P>>;
  space?: Space<P>;
  /** The call's autotune key (default: its integer params rounded up to powers of two, its float params left out). */
  key?: (call: CallView<P>) => Key;
  /** The buffers output checks compare (default: candidate 0's read_write bindings). */
  outputs?: Array<string | number>;
  outputType?: string | string[]; atol?: number | number[]; rtol?: number | number[];
  /**
   * The expected outputs for the check's inputs (each buffer's bytes, in the call's order): one
   * per output, synchronous. A typed array of another element type fails the tune, naming the
   * buffer. Without it the candidates judge each other: the largest group that agrees is right.
   */
  reference?: (call: CallView<P>, inputs: Uint8Array[]) => ReferenceOutput[];
  /** For a space too large to try whole: how much of it a tune measures. */
  search?: { strategy?: "model" | "random" | (string & {}); candidates?: number; seconds?: number; seed?: number;
             options?: Record<string, unknown> };
}
/** "Failed": every candidate failed for the key; it stays so until the set changes or `retune`. */
export type KeyState = "Hit" | "Miss" | "Pending" | "Failed";
/** A defineSet call's state (`check`, `settle`, `retune`). */
export interface KeyAnswer {
  set: string;
  /** The call's key, as the set's key function made it. */
  key: Key;
  state: KeyState; winner?: string; failure?: Failure;
}
/** What `execute` ran: the winner, or the fallback (candidate 0) while Pending. */
export interface ExecuteAnswer extends KeyAnswer {
  ran: string;
}
export interface TunableSetHandle<P extends ParamsOf<P> = Params> {
  readonly name: string;
  /** The candidates' names, in the set's order (candidate 0 is the fallback). */
  readonly candidates: string[];
  /** The call's state; on a miss the tune starts and this says Pending. LaunchRefused for a call WebGPU would refuse. */
  check(call: Call<P>): KeyAnswer;
  /**
   * Run the winner on the call (the fallback while Pending, once compiled); the launch is
   * encoded before this returns. Rejects with LaunchRefused when WebGPU refuses the launch,
   * naming the set, the key and the binding, or with WebGPU's words; no other call sees it.
   * ConfigError (with `field`) for a call that cannot run: params missing or wrong, a buffer that
   * is no GPUBuffer, a grid that gives no whole counts. What the set's own grid or key function
   * throws comes back as it was thrown.
   */
  execute(call: Call<P>): Promise<ExecuteAnswer>;
  /** The key's state once it is no longer Pending: a Miss is tuned first (as `check` starts it), a
   *  tune under way waited for (`timeout` in seconds, default 600; ConfigError if not a number >= 0). */
  settle(call: Call<P>, options?: { timeout?: number }): Promise<KeyAnswer>;
  /** Forget this key's remembered failure or winner in this page load and tune it again. */
  retune(call: Call<P>): Promise<KeyAnswer>;
  /** Every candidate's result for the call's key, or null before a tune decided it. */
  results(call: Call<P>): CandidateResult[] | null;
}

// -- registered keys, by label ---------------------------------------------------------------

/** A registered key's state (`wgtune.check(set, label)`); a Hit carries what was stored. */
export interface LabelAnswer {
  set: string;
  /** The key's label: "128x128x128". */
  key: string;
  state: KeyState; winner?: string; failure?: Failure;
  /** A Hit's stored results, policy and confidence. */
  results?: CandidateResult[]; policy?: string; confidence?: Confidence | null;
}
export interface LabelExecuteAnswer extends LabelAnswer {
  ran: string;
  /** Whether the fallback ran (no winner yet). */
  ran_fallback: boolean;
  fallback: string;
  /** The output buffer's bytes in base64, with `{output: true}`. */
  output?: string;
}
/** The device and every registered set with its keys (`catalogue()`). */
export interface Catalogue {
  identity: { vendor: string; device: string; driver: string; backend: string };
  adapter: AdapterInfo;
  timing: "gpu-timestamp" | "wall-clock";
  /** Seconds: the clock's finest step, as tunes measure it. */
  clock_grain: number;
  policy: string;
  limits: { max_workgroup_storage: number; max_invocations: number };
  sets: Array<{ name: string; candidates: string[]; fallback: string; keys: LabelAnswer[] }>;
}

// -- batches, stored winners, bundles, sharing -----------------------------------------------

/**
 * Launches recorded and submitted together (wgtune.batch): every set.execute from its opening
 * until submit() goes into a command buffer, in order (a submission per 128 launches).
 */
export interface Batch {
  /** Whether launches are still being recorded into this batch. */
  readonly open: boolean;
  /**
   * Submit what was recorded and close the batch (at the call: awaiting is for the answer); an
   * Error if it was submitted already. Resolves once WebGPU took every submission of the batch;
   * rejects with LaunchRefused naming the calls of one it refused whole (a buffer destroyed after
   * its launch was recorded), whose next execute is checked again. A batch inside another
   * resolves at once: the outer one's promise answers for its launches.
   */
  submit(): Promise<void>;
}
/** A stored winner as exports, bundles and the stored-winners page carry it. */
export interface StoredEntry {
  table: string; key: Record<string, KeyValue>; checksum: string; winner: number; winner_name: string;
  results?: Array<CandidateResult | null>;
  policy: string; confidence: Confidence | null; not_run?: string; checked?: boolean;
}
/** One page of the stored winners (api.storedPage): one device's, one set's or all, with the counts. */
export interface StoredPage {
  namespaces: Array<{ namespace: string; fields: Record<string, unknown>; entries: number; current: boolean }>;
  namespace: string | null;
  sets: Array<{ name: string; entries: number }>;
  set: string | null; total: number; offset: number; limit: number;
  /** Each entry as stored, with the page's label of its key. */
  entries: Array<StoredEntry & { label: string }>;
  damaged: number;
}
/** Every device's stored winners (`cache()`; `exportCache()` is its text), as `wgtune cache export` writes it. */
export interface ExportDocument {
  format: "wgtune.export/1";
  /** Each namespace's fields (wgtune, device, tuner) and its winners. */
  namespaces: Array<Record<string, unknown> & { format: "wgtune.cache/1"; entries: StoredEntry[] }>;
}
/** A bundle of winners for many devices, as `wgtune bundle` writes it. */
export interface Bundle {
  format: "wgtune.bundle/1";
  /** When it was built: ISO-8601 UTC ("2026-12-01T02:30:00Z"). */
  built: string;
  /** The wgtune version that built it. */
  wgtune: string;
  namespaces: Array<Record<string, unknown> & {
    entries: Array<Omit<StoredEntry, "results"> & {
      checked: boolean;
      /** How many agreeing reporters stand behind it (a collector's count: one vote per reporter). */
      reports?: number;
    }>;
  }>;
}
/** What loadBundle seeded: this device's winners, of how many entries in how many namespaces. */
export interface BundleLoad {
  /** Winners of this GPU taken from the bundle (0: the bundle does not know it; keys tune as usual). */
  seeded: number; entries: number; namespaces: number;
}
export interface ShareOptions {
  /** Start from the collector's verified winners for this GPU (default true). */
  receive?: boolean;
  /** Called with the sharing's state after the bundle was taken and after every report. */
  onChange?: (state: Sharing) => void;
}
/** Sharing winners with a fleet collector (`wgtune collect`): its state, live. */
export interface Sharing {
  readonly collector: string;
  /** This GPU's verified winners (agreeing reports from the collector's minimum of reporters, 3 by default) taken. */
  seeded: number;
  /** This GPU's winners with fewer reports, left out: this page tunes those keys itself and reports. */
  unverified: number;
  /** Reports the collector took, and refused (a set or checksum it does not know). */
  sent: number; refused: number;
  /** The last problem (unreachable, busy, a refusal), or null. */
  error: string | null;
  stop(): void;
}

// -- the API ---------------------------------------------------------------------------------

export interface Wgtune {
  readonly version: string;
  readonly device: WgtuneGPUDevice;
  readonly adapterInfo: AdapterInfo;
  readonly readyMs: number;
  /** Milliseconds each step of the load took (device, pyodide, wheel, session...). */
  readonly loadPhases: Record<string, number>;
  /**
   * Define a tunable set from JavaScript: your kernels, tuned on your buffers. Type the params
   * of its calls with `defineSet<{n: number; alpha: number}>({...})`: then `call.params.n` is a number.
   * Redefining a name with other candidates is a ConfigError (field "name"), even while the
   * first definition is still in flight; the same candidates again are the same set.
   */
  defineSet<P extends ParamsOf<P> = Params>(spec: SetSpec<P>): Promise<TunableSetHandle<P>>;
  /** Open a batch; submit it with batch.submit(). */
  batch(): Batch;
  /**
   * Run `body` in a batch and submit what it launched when it returns (a promise: when it
   * settles). Resolves to what `body` returned once WebGPU took the batch, rejects as
   * `batch.submit()` does; what `body` throws is thrown at once, after what it launched went out.
   */
  batch<T>(body: (batch: Batch) => T): Promise<Awaited<T>>;
  /** The registered (the demo's) sets and keys. */
  catalogue(): Catalogue;
  check(set: string, label: string): LabelAnswer;
  execute(set: string, label: string, options?: { output?: boolean }): Promise<LabelExecuteAnswer>;
  settle(set: string, label: string, options?: { timeout?: number }): Promise<LabelAnswer>;
  /** The tune records of this page load. */
  records(): RecordItem[];
  /** A page of the stored winners (this device's by default), reading only that page. */
  storedPage(options?: { namespace?: string | null; set?: string | null; offset?: number; limit?: number }):
    Promise<StoredPage>;
  cache(): Promise<ExportDocument>;
  exportCache(): Promise<string>;
  /**
   * Merge an export (native or browser) into IndexedDB: its text, or the document `cache()` gives;
   * how many entries it wrote. All or none: a damaged entry (a winner out of range of its results)
   * rejects it, StoreError naming the entry. Entries are kept whatever this page's sets, as natively:
   * one whose winner is none of its set's candidates is stored and counted, and never serves.
   */
  importCache(text: string | ExportDocument): Promise<number>;
  /** Forget stored winners: this device's, or `device`'s (a namespace as storedPage names it), or `all`; how many. */
  clearCache(options?: { device?: string; all?: boolean }): Promise<number>;
  /** Seed the tuner from a bundle (a same-origin URL, or the bundle); rejects naming what is wrong, seeding nothing. */
  loadBundle(source: string | URL | Bundle): Promise<BundleLoad>;
  /** Opt in to a fleet collector at `url`: start from its verified winners, send each winner tuned here. */
  shareWinners(url: string | URL, options?: ShareOptions): Promise<Sharing>;
  /** Wait until winners tuned so far are written to IndexedDB. */
  flush(): Promise<void>;
  /** Stop tunes, write what is pending, close storage and release wgtune's GPU objects; later calls reject.
   *  A GPUDevice wgtune opened itself (`wgtune.device`) is destroyed, and with it every buffer made on it:
   *  load with `{device}` of your own to keep them (wgtune leaves an app's device to the app). */
  dispose(): Promise<void>;
  /** Listen to events; returns the function that stops listening. */
  on(listener: (event: WgtuneEvent) => void): () => void;
}
export declare function loadWgtune(options?: LoadOptions): Promise<Wgtune>;
