#!/usr/bin/env bash
# The farm's throughput on the H200 machine's CPU cores (bench/results/h200-cpu-farm.txt): lavapipe
# (Debian's mesa 22.3.6, packed by bench/lavapipe_pack.sh into build/lvp.tar.xz, a private ICD: nothing of the
# host's replaced), 2 llvmpipe threads a worker. Carry .gl .whl build/farm-wheels build/lvp.tar.xz.
set -e
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site build/farm-wheels/*.whl
mkdir -p /tmp/lvp && tar -xJf build/lvp.tar.xz -C /tmp/lvp
cat > /tmp/lvp/icd.json <<JSON
{"ICD": {"api_version": "1.1.230", "library_path": "/tmp/lvp/lib/libvulkan_lvp.so"}, "file_format_version": "1.0.0"}
JSON
export VK_DRIVER_FILES=/tmp/lvp/icd.json LD_LIBRARY_PATH=/tmp/lvp/lib LP_NUM_THREADS=2
# No OpenGL adapter: the NVIDIA EGL would show up through wgpu's GL backend.
export __EGL_VENDOR_LIBRARY_FILENAMES=/nonexistent
python3 -c "import wgpu; print([a.summary for a in wgpu.gpu.enumerate_adapters_sync()])"
nproc; lscpu | grep "Model name"
python3 bench/farm.py --same-adapter --shapes ${SHAPES:-24} --workers ${WORKERS:-1 2 4 8} --out $OUT/h200-cpu-farm.txt
