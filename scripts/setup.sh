#!/usr/bin/env bash
# Set up wgtune on a fresh Debian machine: a Vulkan driver (lavapipe where there is no GPU),
# a virtual environment in .venv, and wgtune installed editable with its test tools.
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
# wgpu-py needs a Vulkan loader and driver; Mesa's lavapipe runs on the CPU.
dpkg -s mesa-vulkan-drivers >/dev/null 2>&1 || need_apt+=(mesa-vulkan-drivers)
dpkg -s libvulkan1 >/dev/null 2>&1 || need_apt+=(libvulkan1)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need_apt+=(python3-venv)
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
.venv/bin/python -m pip install -q -e '.[dev]'
echo "setup: ready ($(.venv/bin/python -c 'import wgpu, wgtune; print("wgtune", wgtune.__version__, "wgpu", wgpu.__version__)'))"
