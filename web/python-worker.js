// A module worker that starts Python with wgtune imported and sends back its memory snapshot:
// the first load's interpreter start-up (1-3 s of one task) runs here, off the page's main
// thread, which then only restores the snapshot (see python.js). Python itself cannot live here:
// the tuner drives the page's GPUDevice, whose objects cannot leave the main thread.
//
// Message in: {indexURL, wheelUrl, stackSwitching}; out: {snapshot: Uint8Array} (transferred) or {error: text}.

import { installWheel, SNAPSHOT_IMPORTS, withStackSwitching } from "./python.js";

self.onmessage = async ({ data: { indexURL, wheelUrl, stackSwitching = false } }) => {
  try {
    const wheel = fetch(wheelUrl).then((response) => {
      if (!response.ok) throw new Error(`HTTP ${response.status} for ${wheelUrl}`);
      return response.arrayBuffer();
    });
    const { loadPyodide } = await import(new URL("pyodide.mjs", indexURL).href);
    // As the page will restore it (a snapshot made with JSPI would expect it there).
    const pyodide = await withStackSwitching(stackSwitching, () => loadPyodide({ indexURL, _makeSnapshot: true }));
    installWheel(pyodide, await wheel, wheelUrl);
    pyodide.runPython(SNAPSHOT_IMPORTS);
    const snapshot = pyodide.makeMemorySnapshot();
    self.postMessage({ snapshot }, [snapshot.buffer]);
  } catch (error) {
    self.postMessage({ error: String(error?.message ?? error) });
  }
};
