#!/usr/bin/env bash
# Set up wgtune on a fresh Debian machine: a Vulkan driver (lavapipe where there is no GPU),
# Node.js and the page's npm packages (Pyodide), a virtual environment in .venv, and wgtune
# installed editable with its test tools.
#   scripts/setup.sh            what `make run` needs
#   scripts/setup.sh --browser  also what the browser tests need: Debian's Chromium, the
#                               pytest wheels the core's tests use inside Pyodide, and the
#                               page's Pyodide in npm's cache (the npm package installs offline)
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
browser=0
[ "${1:-}" = "--browser" ] && browser=1

need_apt=()
# wgpu-py needs a Vulkan loader and driver; Mesa's lavapipe runs on the CPU.
dpkg -s mesa-vulkan-drivers >/dev/null 2>&1 || need_apt+=(mesa-vulkan-drivers)
dpkg -s libvulkan1 >/dev/null 2>&1 || need_apt+=(libvulkan1)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need_apt+=(python3-venv)
command -v npm >/dev/null 2>&1 || need_apt+=(nodejs npm)
if [ "$browser" -eq 1 ]; then
  # WebGPU in headless Chromium (SwiftShader where there is no GPU); Playwright drives it.
  [ -x /usr/bin/chromium ] || need_apt+=(chromium)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "setup: installing ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "setup: missing Debian packages: ${need_apt[*]}; run as root or: sudo apt-get install ${need_apt[*]}" >&2
    exit 1
  fi
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
# dev: the test tools; farm: Dask distributed, which `wgtune farm` and its tests run on;
# collector-postgres: psycopg, for `wgtune collect --db postgresql://...`; dawn: wgpudawn, whose Null
# backend the tests compile subgroup-matrix kernels on (backends/dawn.py).
.venv/bin/python -m pip install -q -e '.[dev,farm,collector-postgres,dawn]'
# The page's Pyodide, pinned by web/package-lock.json and served locally by `wgtune serve`.
(cd web && npm ci --no-audit --no-fund --loglevel=error)
if [ "$browser" -eq 1 ]; then
  # e2e/test_npm_package.py installs the npm package with `npm install --offline`: its dependency,
  # the page's Pyodide, must be in npm's cache with the registry's metadata, which npm ci does not keep.
  pyodide_pin=$(node -p 'require("./web/package.json").dependencies.pyodide')
  warm=$(mktemp -d)
  echo '{"private": true}' > "$warm/package.json"
  (cd "$warm" && npm install --no-save --no-audit --no-fund --loglevel=error "pyodide@$pyodide_pin" >/dev/null)
  rm -rf "$warm"
  .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.14 \
    -d build/pyodide-wheels -r e2e/pyodide-requirements.txt
fi
echo "setup: ready ($(.venv/bin/python -c 'import wgpu, wgtune; print("wgtune", wgtune.__version__, "wgpu", wgpu.__version__)'))"
