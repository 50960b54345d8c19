#!/usr/bin/env bash
# Pack Debian's lavapipe (a CPU Vulkan adapter) with the libraries an Ubuntu 24.04 host lacks, into
# build/lvp.tar.xz (about 31 MB), for the farm's CPU-worker figures on the H200 machine
# (bench/results/h200-cpu-farm.txt; run there by bench/h200_cpu_farm.sh). Run from the project root on a
# Debian 12 machine that reaches its package archive.
set -euo pipefail
work=$(mktemp -d)
(cd "$work" && apt-get download mesa-vulkan-drivers libllvm15 libz3-4 libwayland-client0 libx11-xcb1 libxcb-dri3-0 \
  libxcb-present0 libxcb-randr0 libxcb-shm0 libxcb-sync1 libxcb-xfixes0 libxshmfence1 libx11-6 libxau6 libxdmcp6 \
  libbsd0 libmd0 libsensors5 >/dev/null 2>&1)
mkdir -p "$work/root" "$work/pack/lib" build
for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/root"; done
lib="$work/root/usr/lib/x86_64-linux-gnu"
cp -a "$lib"/libLLVM-15.so.1 "$lib"/libvulkan_lvp.so "$lib"/libz3.so.4 "$lib"/libX11-xcb.so.1* "$lib"/libX11.so.6* \
  "$lib"/libXau.so.6* "$lib"/libXdmcp.so.6* "$lib"/libbsd.so.0* "$lib"/libmd.so.0* "$lib"/libsensors.so.5* \
  "$lib"/libwayland-client.so.0* "$lib"/libxcb-*.so.* "$lib"/libxshmfence.so.1* "$work/pack/lib/"
tar -cJf build/lvp.tar.xz -C "$work/pack" lib
rm -rf "$work"
ls -la build/lvp.tar.xz
