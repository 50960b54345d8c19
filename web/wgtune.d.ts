// TypeScript declarations of wgtune's JavaScript API (web/wgtune.js, web/sets.js).
// Checked by tests/test_typescript.py: `tsc --noEmit` on web/types-example.ts, which uses them.
/// <reference types="@webgpu/types" />

/** Why wgtune cannot run in this browser, with what to do about it. */
export declare class WgtuneUnavailable extends Error {
  advice: string;
}

/** How tunes sample, named as the WGTUNE_* variables are natively, in lower case. */
export interface TuneSettings {
  policy?: "adaptive" | "fixed";
  budget?: number;
  max_samples?: number;
  tolerance?: number;
  confidence?: number;
  warmups?: number;
  samples?: number;
  min_sample?: number;
  /** Seconds one launch of a candidate may take before it is a Timeout result. */
  time_limit?: number;
  /**
   * Output checks (default on): every candidate's outputs are compared, on the GPU, with the
   * set's reference or, without one, with the other candidates'; a wrong one is a Mismatch and
   * never wins. 0 (or false) turns them off: then a fast wrong candidate can win.
   */
  checks?: 0 | 1 | boolean;
}

export interface LoadOptions {
  /** The GPUDevice to tune on (default: wgtune opens the high-performance adapter's). */
  device?: GPUDevice | null;
  /** Loading progress, as text. */
  onStatus?: (text: string) => void;
  /** Tune progress and device events. */
  onEvent?: (event: WgtuneEvent) => void;
  /** The IndexedDB database name (default "wgtune"). */
  database?: string;
  settings?: TuneSettings;
  /** Where wgtune's assets (Pyodide, the wheel) are served from (default: beside wgtune.js). */
  baseUrl?: string | URL;
  /** Register the demo's sets and keys (the demo page does; a library user need not). */
  demo?: boolean;
}

export type KeyState = "Hit" | "Miss" | "Pending" | "Unchecked";

/** A candidate's result: its timing, or its failure with the reason. */
export interface CandidateResult {
  name: string;
  index?: number;
  median?: number;
  min?: number;
  max?: number;
  samples?: number[];
  eliminated_early?: boolean;
  error?: "Skip" | "InvalidSamples" | "Unknown" | "Launch" | "Mismatch" | "Timeout";
  reason?: string;
}

export type WgtuneEvent =
  | { type: "pending"; set: string; key: string }
  | { type: "started"; set: string; key: string; candidates: number }
  | { type: "trial"; set: string; key: string; index: number; result: CandidateResult; wall: number }
  | { type: "finished"; set: string; key: string; winner: string; stored: boolean | "pending";
      confidence: unknown; short_circuit: number | null;
      /** Who said which outputs are right: the set's reference, the candidates' agreement, or "" (unchecked). */
      judge?: "reference" | "agreement" | "";
      /**
       * What the checks found that you should hear of: the set's default (candidate 0) gave a wrong
       * answer here, so the next candidate is its fallback from now on. null when nothing was.
       */
      warning?: string | null;
      /** Another tab tuned it (no tune ran here); announced: heard as it stored it, not waited for. */
      elsewhere?: boolean; announced?: boolean }
  | { type: "failed"; set: string; key: string; reason: string }
  | { type: "record"; record: unknown }
  | { type: "stored"; set: string; table: string; key: string; ok: boolean; reason: string | null }
  | { type: "device-lost"; reason: string; message: string }
  | { type: "device-reopened"; retuning: string[] }
  | { type: "device-gone"; reason: string };

/** A number or nested numbers (a vector field, an array field). */
export type ParamValue = number | ParamValue[];

/**
 * One call of a set: the app's own buffers, by the WGSL's variable names or in binding order,
 * and the params of its uniform, by the uniform struct's field names or in order. Each param is
 * packed as the WGSL declares it (a 2.0 fills an f32 as 2.0).
 */
export interface Call {
  buffers: Record<string, GPUBuffer> | GPUBuffer[];
  params?: Record<string, ParamValue> | ParamValue[];
}

/**
 * What a set's functions see of a call (also of the benchmark's copies of it): its params as
 * given (by name when the uniform is a struct), and each buffer's size in bytes.
 */
export interface CallView {
  params: Record<string, ParamValue> | ParamValue[];
  buffers: Record<string, number> | number[];
}

/** Workgroup counts: [x], [x, y] or [x, y, z]. */
export type Grid = [number] | [number, number] | [number, number, number];

/** The autotune key: calls with equal keys share one tune and one winner. */
export type Key = Record<string, number | string | boolean>;

export interface Candidate {
  name: string;
  wgsl: string;
  grid: ((call: CallView) => Grid) | Grid;
  entryPoint?: string;
  /** Values of the WGSL's `override` constants, by name or numeric @id. */
  constants?: Record<string, number | boolean>;
  workgroupSize?: [number, number, number];
  workgroupStorage?: number;
  /** WebGPU features the WGSL needs ("shader-f16", "subgroups"). */
  features?: string[];
  priority?: number;
  /** This stage's own uniform values, when they are not the call's params. */
  params?: (call: CallView) => ParamValue[];
  /** Further stages, dispatched after this one in the same pass (a two-pass reduction). */
  then?: Candidate[];
  /**
   * Workspace buffers the device makes for each call (the app gives none), by the WGSL name its
   * stages declare them under: bytes, or a function of the call. Declared on the candidate, not
   * on a stage; never one of the call's buffers or outputs; contents undefined at each launch.
   */
  scratch?: Record<string, number | ((call: CallView) => number)>;
}

/** A point of a parameter space: parameter name -> value. */
export type Point = Record<string, number | string | boolean>;

/** One source (or a renderer) and lists of parameter values: one candidate per admitted point. */
export interface Space {
  name?: string;
  /** WGSL whose `override` declarations take the parameters of the same names. */
  source?: string;
  /** Or: the WGSL of one point (any template engine). */
  render?: (point: Point) => string;
  params: Record<string, Array<number | string | boolean>>;
  /** Your configuration: candidate 0, the fallback. */
  default: Point;
  grid: (point: Point, call: CallView) => Grid;
  restrict?: (point: Point) => boolean;
  constants?: (point: Point) => Record<string, number | boolean>;
  workgroupSize?: ((point: Point) => [number, number, number]) | [number, number, number];
  entryPoint?: string;
  features?: string[];
}

export interface SetSpec {
  name: string;
  candidates?: Candidate[];
  space?: Space;
  /** The call's autotune key (default: its params). */
  key?: (call: CallView) => Key;
  /** The buffers output checks compare (default: candidate 0's read_write bindings). */
  outputs?: Array<string | number>;
  outputType?: string | string[];
  atol?: number | number[];
  rtol?: number | number[];
  /**
   * The expected outputs for the check's inputs (each buffer's bytes, in the call's order): an
   * array with one typed array per output, of the output's WGSL element type (a Float32Array
   * for array<f32>, a Uint32Array for array<u32>; a Float32Array for a u32 output fails the tune,
   * naming the buffer), or plain numbers. Synchronous. Without it the candidates judge each other:
   * the largest group that agrees is right, a tie fails the tune asking for one.
   */
  reference?: (call: CallView, inputs: Uint8Array[]) => Array<
    Float32Array | Float64Array | Int32Array | Uint32Array | Int16Array | Uint16Array | Int8Array | Uint8Array |
    ArrayBuffer | number[]
  >;
  /** For a space too large to try whole: how much of it a tune measures. */
  search?: { strategy?: "model" | "random"; candidates?: number; seconds?: number; seed?: number };
}

export interface KeyAnswer {
  set: string;
  key: Key;
  state: KeyState;
  winner?: string;
  failure?: string;
}

export interface TunableSetHandle {
  readonly name: string;
  /** The candidates' names, in the set's order (candidate 0 is the fallback). */
  readonly candidates: string[];
  /**
   * The call's state; on a miss the tune starts and this says Pending. Throws a LaunchRefused
   * error (see execute) for a call whose buffers WebGPU would refuse, instead of tuning it.
   */
  check(call: Call): KeyAnswer;
  /**
   * Run the winner on the call (the fallback while Pending); the launch is encoded before this
   * returns. Rejects with an Error whose pythonType is "LaunchRefused" when WebGPU refuses the
   * launch (a buffer without STORAGE usage, too small, destroyed, of another GPUDevice; a grid over
   * maxComputeWorkgroupsPerDimension): the message names the set, the key and the binding, or
   * gives WebGPU's words. That error belongs to this call: no later call or tune sees it.
   */
  execute(call: Call): Promise<KeyAnswer & { ran: string }>;
  /** Wait until the call's key is no longer Pending. */
  settle(call: Call, options?: { timeout?: number }): Promise<KeyAnswer>;
  /** Every candidate's result for the call's key, or null before a tune decided it. */
  results(call: Call): CandidateResult[] | null;
}

/**
 * Launches recorded and submitted together (wgtune.batch): every set.execute from its opening
 * until submit() goes into a command buffer, in order (a submission per 128 launches). A read or a
 * tune meanwhile submits what was recorded so far first; a batch opened inside another joins it.
 */
export interface Batch {
  /** Whether launches are still being recorded into this batch. */
  readonly open: boolean;
  /** Submit what was recorded and close the batch; an Error if it was submitted already. */
  submit(): void;
}

/** One page of the stored winners (api.storedPage): one device's, one set's or all, with the counts. */
export interface StoredPage {
  namespaces: Array<{ namespace: string; fields: Record<string, unknown>; entries: number; current: boolean }>;
  namespace: string | null;
  sets: Array<{ name: string; entries: number }>;
  set: string | null;
  total: number;
  offset: number;
  limit: number;
  /** Each entry as stored (table, key, winner_name, confidence, results...), with the page's label of its key. */
  entries: Array<Record<string, unknown> & { table: string; winner_name: string; label: string }>;
  damaged: number;
}

/** A bundle of winners for many devices, as `wgtune bundle` writes it (format "wgtune.bundle/1"). */
export interface Bundle {
  format: "wgtune.bundle/1";
  /** When it was built: ISO-8601 UTC ("2026-12-01T02:30:00Z"). */
  built: string;
  /** The wgtune version that built it. */
  wgtune: string;
  /** Each device namespace's fields (wgtune, device, tuner) and its winners. */
  namespaces: Array<Record<string, unknown> & {
    entries: Array<{
      table: string; key: Record<string, string | number | boolean | null>; checksum: string; winner: number;
      winner_name: string; confidence: Record<string, unknown> | null; policy: string; checked: boolean;
      /** How many agreeing reporters stand behind it (a collector's count: one vote per reporter). */
      reports?: number;
    }>;
  }>;
}

/** What loadBundle seeded: this device's winners, of how many entries in how many namespaces. */
export interface BundleLoad {
  /** Winners of this GPU taken from the bundle (0: the bundle does not know it; keys tune as usual). */
  seeded: number;
  entries: number;
  namespaces: number;
}

/** Options of shareWinners. */
export interface ShareOptions {
  /** Start from the collector's verified winners for this GPU (default true). */
  receive?: boolean;
  /** Called with the sharing's state after the bundle was taken and after every report. */
  onChange?: (state: Sharing) => void;
}

/** Sharing winners with a fleet collector (`wgtune collect`): its state, live. */
export interface Sharing {
  /** The collector's base URL. */
  readonly collector: string;
  /** This GPU's verified winners (agreeing reports from the collector's minimum of reporters, 3 by default) taken from the collector. */
  seeded: number;
  /** This GPU's winners with one report, left out: this page tunes those keys itself and reports. */
  unverified: number;
  /** Reports the collector took, and refused (a set or checksum it does not know). */
  sent: number;
  refused: number;
  /** The last problem (unreachable, busy, a refusal), or null. */
  error: string | null;
  /** Stop sending. */
  stop(): void;
}

export interface Wgtune {
  readonly version: string;
  readonly device: GPUDevice;
  readonly adapterInfo: Record<string, unknown>;
  readonly readyMs: number;
  /** Milliseconds each step of the load took (device, pyodide, wheel, session...). */
  readonly loadPhases: Record<string, number>;
  /** A page of the stored winners (this device's by default), reading only that page. */
  storedPage(options?: { namespace?: string | null; set?: string | null; offset?: number; limit?: number }):
    Promise<StoredPage>;
  /** Define a tunable set from JavaScript: your kernels, tuned on your buffers. */
  defineSet(spec: SetSpec): Promise<TunableSetHandle>;
  /** Open a batch; submit it with batch.submit(). */
  batch(): Batch;
  /**
   * Run `body` in a batch and submit what it launched when it returns (or throws); a body that
   * returns a promise keeps the batch open until the promise settles. Returns what `body` returns.
   */
  batch<T>(body: (batch: Batch) => T): T;
  /** The demo's (and registered) sets and keys, by label. */
  catalogue(): unknown;
  check(set: string, key: string): KeyAnswer;
  execute(set: string, key: string, options?: { output?: boolean }): Promise<KeyAnswer & { ran: string }>;
  settle(set: string, key: string, options?: { timeout?: number }): Promise<KeyAnswer>;
  records(): unknown[];
  cache(): Promise<unknown>;
  exportCache(): Promise<string>;
  /** Merge an export (native or browser) into IndexedDB; how many entries. */
  importCache(text: string): Promise<number>;
  clearCache(): Promise<number>;
  /**
   * Seed the tuner from a bundle (a URL on the page's origin, or the bundle itself): a GPU it
   * knows gets Hits at once and tunes nothing. Kept in memory; a winner stored here keeps priority.
   * Rejects with an Error naming what is wrong with the bundle, seeding nothing.
   */
  loadBundle(source: string | URL | Bundle): Promise<BundleLoad>;
  /**
   * Opt in to a fleet collector at `url` (its base URL, any origin): start from its verified
   * winners for this GPU, then send each winner this page tunes (device identity, set, key,
   * checksum, winner, confidence; nothing else). Rejects with a TypeError for a URL that is not http(s).
   */
  shareWinners(url: string | URL, options?: ShareOptions): Promise<Sharing>;
  flush(): Promise<void>;
  /** Listen to events; returns the function that stops listening. */
  on(listener: (event: WgtuneEvent) => void): () => void;
}

export declare function loadWgtune(options?: LoadOptions): Promise<Wgtune>;
