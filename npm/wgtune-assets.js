#!/usr/bin/env node
// wgtune-assets DIR: writes what wgtune loads at run time into DIR, a directory your app serves
// (public/wgtune, dist/wgtune): the package's assets/ (the wgtune wheel, wgtune-config.json naming
// it, the worker that starts Python) and Pyodide's runtime under DIR/pyodide/, from the Pyodide
// that npm installed beside wgtune. Then load with loadWgtune({baseUrl: "<the URL DIR is served at>"}).
// A bundler cannot do this itself: these files are fetched by URL at run time, never imported.

import { cpSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

// What Pyodide loads at run time (the same list as wgtune.cli.library.PYODIDE_FILES).
const PYODIDE_FILES = [
  "pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json", "package.json",
];

function fail(message, status = 1) {
  console.error(`wgtune-assets: ${message}`);
  process.exit(status);
}

const args = process.argv.slice(2);
if (args.length !== 1 || args[0].startsWith("-")) {
  fail("usage: wgtune-assets DIR (the directory your app serves wgtune's assets from, e.g. public/wgtune)", 2);
}
const dest = args[0];
const here = dirname(fileURLToPath(import.meta.url));
let pyodide;
try {
  pyodide = dirname(createRequire(import.meta.url).resolve("pyodide/package.json"));
} catch {
  fail("Pyodide is not installed beside wgtune (it is wgtune's dependency: run npm install)");
}
try {
  cpSync(join(here, "assets"), dest, { recursive: true });
  mkdirSync(join(dest, "pyodide"), { recursive: true });
  for (const name of PYODIDE_FILES) cpSync(join(pyodide, name), join(dest, "pyodide", name));
} catch (error) {
  fail(`writing ${dest} failed: ${error.message}`);
}
console.log(`wgtune-assets: wrote wgtune's assets and Pyodide to ${dest}: pass loadWgtune({baseUrl}) the URL it is served at`);
