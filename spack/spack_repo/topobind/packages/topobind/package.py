# Spack recipe for topobind: topology-aware job launch and binding for HPC nodes.
from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import *


class Topobind(MakefilePackage):
    """Detects the node topology with hwloc, plans layouts (compact, spread,
    every-other-core, per-L3, L3 groups, per-NUMA, per-socket), emits OMP_*, OpenMPI and
    Slurm binding flags, verifies placement, and ships STREAM/DGEMM/HPL/latency kernels on
    1 GiB pages, ReFrame checks and a fleet report."""

    homepage = "https://topobind.invalid"
    git = "https://topobind.invalid/topobind.git"

    maintainers("topobind-developers")

    license("BSD-3-Clause")

    version("main", branch="main")
    version("0.1.0", tag="v0.1.0")

    variant("mpi", default=True, description="Build the MPI placement probe (whereami-mpi)")
    variant("hpl", default=True, description="Depend on HPL for the hpl kernel")

    # C kernels: compiled and linked against these.
    depends_on("c", type="build")
    depends_on("gmake", type="build")
    depends_on("hwloc@2.9:+libxml2", type=("build", "link", "run"))
    depends_on("numactl", type=("build", "link"))
    depends_on("blas", type=("build", "link"))
    depends_on("mpi", when="+mpi", type=("build", "link", "run"))
    depends_on("hpl", when="+hpl", type="run")

    # The Python engine and CLI.
    depends_on("python@3.11:", type=("build", "run"))
    depends_on("py-pip", type="build")
    depends_on("py-setuptools", type="build")
    depends_on("py-jsonschema", type="run")
    depends_on("py-pyyaml", type="run")
    depends_on("py-matplotlib", type="run")
    depends_on("reframe@4.9:", type="run")

    def build(self, spec, prefix):
        # The project's own Makefile targets, so the recipe cannot drift from them.
        args = [f"CC={spack_cc}"]
        if spec.satisfies("+mpi"):
            args.append(f"MPICC={spec['mpi'].mpicc}")
        make("-C", "kernels", *args)

    def install(self, spec, prefix):
        make("-C", "kernels", "install", f"PREFIX={prefix}")
        pip = which("pip") or Executable(spec["python"].command.path)
        pip("install", "--no-deps", "--no-build-isolation", f"--prefix={prefix}", ".")
        share = join_path(prefix, "share", "topobind")
        for sub in ("launchers", "reframe_tests", "site_configs", "docs"):
            if os.path.isdir(sub):
                install_tree(sub, join_path(share, sub))
        mkdirp(prefix.bin)
        for script in ("topobind-run", "topobind-env"):
            install(join_path("launchers", script), prefix.bin)
