# Spack recipe for topobind (Spack 1.x, package API v2: spack_repo/<namespace>/packages/).
#
# The build steps call the project's own Makefile targets (make -C kernels, make -C rankstep,
# and their install PREFIX=...; both link libtb/, which the first builds once), so the recipe
# and 'make' cannot drift apart; 'make spack-check'
# installs it with real Spack (docs/install.md).
import glob
import os

from spack_repo.builtin.build_systems.python import PythonPackage

from spack.package import *


class Topobind(PythonPackage):
    """Topology-aware job launch and binding for Slurm/MPI/OpenMP on HPC nodes: detects the
    node with hwloc, plans layouts (compact, spread, every-other-core, per-L3, per-NUMA,
    per-socket), emits OMP_*, mpirun and srun binding flags, verifies placement, and ships
    STREAM/DGEMM/HPL/latency kernels, ReFrame checks and a fleet report."""

    # The project's clone URL. Inside the project's own Spack environment (spack.yaml) the
    # package is built from the checkout itself ('develop:'), not fetched.
    homepage = "https://topobind.invalid"
    git = "https://topobind.invalid/topobind.git"

    version("main", branch="main")
    version("0.1.0", tag="v0.1.0")

    variant("mpi", default=True, description="Build the MPI placement probe whereami-mpi")
    variant("hpl", default=True, description="Add HPL (xhpl) for 'topobind bench hpl'")
    # The plugins (docs/spank.md, docs/flux.md), each built against the site's own scheduler:
    # its headers are the ABI the plugin is loaded with (LLNL's mpibind recipe has +flux too).
    variant(
        "slurm",
        default=False,
        description="Build the SPANK plugin (srun --topobind) into lib/slurm/, for plugstack.conf",
    )
    variant(
        "flux",
        default=False,
        description="Build the Flux shell plugin into lib/flux/shell/plugins/ "
        "(conf.shell_pluginpath)",
    )

    # The C kernels (kernels/Makefile): C11 + OpenMP; dgemm calls cblas_dgemm. The rank step
    # (rankstep/Makefile: rankexec and the hugepage shim): C11, the architecture's baseline.
    # Both link the C library libtb/ (libtb/Makefile: libtb.a, C11, the baseline), built once
    # by the first make with Spack's compiler (CC is passed on to it).
    depends_on("c", type="build")
    depends_on("gmake", type="build")
    depends_on("blas", type=("build", "link"))
    depends_on("mpi", type=("build", "link", "run"), when="+mpi")
    # slurm/spank.h and the libslurm the plugin names its API version from; the site's Slurm
    # (an external: never built by Spack, see spack.yaml)
    depends_on("slurm", when="+slurm")
    # flux/shell.h; the job shell resolves the plugin's flux_shell_* symbols when it loads it
    depends_on("flux-core@0.30:", when="+flux")

    # Tools that the Python engine, the launchers and the ReFrame checks run.
    depends_on("hwloc@2.9:+libxml2", type="run")  # lstopo-no-graphics, hwloc-calc; XML input
    depends_on("numactl", type="run")  # numactl --membind in the ReFrame checks
    depends_on("hpl", type="run", when="+hpl")

    # The Python package (pyproject.toml); PythonPackage adds python, py-pip and py-wheel.
    depends_on("python@3.11:", type=("build", "run"))
    depends_on("py-setuptools@64:", type="build")
    depends_on("py-jsonschema@4.17:", type="run")
    depends_on("py-pyyaml@6:", type="run")
    depends_on("py-matplotlib@3.6:", type="run")
    depends_on("reframe@4.9:4", type="run")  # a release, never reframe@develop

    def kernel_make_args(self):
        spec = self.spec
        blas = spec["blas"]
        return [
            f"CC={spack_cc}",
            # Spack's compiler wrapper adds the target's -march flags (the Makefile's default
            # CFLAGS has -march=native, which would tune for the build host instead).
            "CFLAGS=-O3",
            f"BLAS_CFLAGS={blas.headers.cpp_flags}",
            f"BLAS_LIBS={blas.libs.ld_flags}",
            # An empty MPICC stops the Makefile from picking up a system mpicc.
            f"MPICC={spec['mpi'].mpicc}" if spec.satisfies("+mpi") else "MPICC=",
        ]

    @run_before("install")
    def build_kernels(self):
        with working_dir(self.stage.source_path):
            make("-C", "kernels", "all", *self.kernel_make_args())
            make("-C", "rankstep", "all", f"CC={spack_cc}")

    def slurm_make_args(self):
        slurm = self.spec["slurm"].prefix
        args = [f"CC={spack_cc}", f"SLURM_INCLUDE={slurm.include}"]
        # libslurm.so's soname gives the plugin its Slurm API number (rankstep/Makefile)
        for libdir in (slurm.lib, slurm.lib64, join_path(slurm.lib, "x86_64-linux-gnu")):
            if os.path.exists(join_path(libdir, "libslurm.so")):
                args.append(f"SLURM_LIBDIR={libdir}")
                break
        return args

    def plugin_command(self):
        """libexec/topobind/topobind: the plugins run topobind with a clean environment (a
        fixed PATH, no PYTHONPATH), where Spack's bin/topobind finds no module: this one
        sets the Python path of the install and its Python dependencies, then runs it."""
        prefix = self.prefix
        paths = sorted(glob.glob(join_path(prefix, "lib", "python3*", "site-packages")))
        for p in os.environ.get("PYTHONPATH", "").split(os.pathsep):
            if p and p not in paths:
                paths.append(p)
        command = join_path(prefix.libexec, "topobind", "topobind")
        mkdirp(os.path.dirname(command))
        with open(command, "w") as f:
            f.write("#!/bin/sh\n# topobind for the SPANK and Flux plugins (a clean environment)\n")
            f.write(f"PYTHONPATH={os.pathsep.join(paths)}\nexport PYTHONPATH\n")
            f.write(f'exec {prefix.bin}/topobind "$@"\n')
        os.chmod(command, 0o755)
        return command

    @run_after("install")
    def install_plugins(self):
        """The SPANK plugin into lib/slurm/ with a plugstack.conf line for it in
        share/topobind/; the Flux shell plugin into lib/flux/shell/plugins/ (the folder to
        name in conf.shell_pluginpath); the topobind they run (:meth:`plugin_command`)."""
        prefix = self.prefix
        share = join_path(prefix.share, "topobind")
        mkdirp(share)
        if self.spec.satisfies("+slurm") or self.spec.satisfies("+flux"):
            command = self.plugin_command()
        with working_dir(self.stage.source_path):
            if self.spec.satisfies("+slurm"):
                plugins = join_path(prefix.lib, "slurm")
                make("-C", "rankstep", "spank-install", f"SLURM_PLUGIN_DIR={plugins}",
                     *self.slurm_make_args())  # fmt: skip
                with open(join_path(share, "plugstack.conf"), "w") as f:
                    f.write(f"required {plugins}/topobind_spank.so topobind={command}\n")
            if self.spec.satisfies("+flux"):
                flux = self.spec["flux-core"].prefix
                make("-C", "rankstep", "flux-plugin", f"CC={spack_cc}",
                     f"FLUX_INCLUDE={flux.include}")  # fmt: skip
                plugins = join_path(prefix.lib, "flux", "shell", "plugins")
                mkdirp(plugins)
                install(join_path("rankstep", "bin", "topobind_flux.so"),
                        join_path(plugins, "topobind.so"))  # fmt: skip

    @run_after("install")
    def install_kernels_and_data(self):
        prefix = self.prefix
        share = join_path(prefix.share, "topobind")
        with working_dir(self.stage.source_path):
            make("-C", "kernels", "install", f"PREFIX={prefix}", *self.kernel_make_args())
            # rankexec and the shim beside the kernels (TOPOBIND_KERNELS_DIR below)
            make("-C", "rankstep", "install", f"PREFIX={prefix}", f"CC={spack_cc}")
            mkdirp(prefix.bin)
            for name in sorted(os.listdir("launchers")):
                path = join_path("launchers", name)
                if os.path.isfile(path):  # the wrapper scripts topobind-run, topobind-env
                    install(path, prefix.bin)
            install_tree("reframe_tests", join_path(share, "reframe_tests"))
            install_tree("site_configs", join_path(share, "site_configs"))

    def setup_build_environment(self, env):
        # the wheel's own C build (setup.py) is left out: build_kernels below makes them with
        # Spack's compiler, BLAS and MPI, installed into the prefix's bin/
        env.set("TOPOBIND_BUILD_C", "0")

    def setup_run_environment(self, env):
        # The kernels, rankexec and the LD_PRELOAD hugepage shim, and the site descriptions as
        # installed; without these topobind looks next to its source checkout.
        env.set("TOPOBIND_KERNELS_DIR", self.prefix.bin)
        env.set("TOPOBIND_SITES_DIR", join_path(self.prefix.share, "topobind", "site_configs"))
        if self.spec.satisfies("+flux"):
            # the shell plugin (loaded from conf.shell_pluginpath) runs the job PATH's first
            # topobind with a clean environment: the one that sets its Python path
            # (plugin_command). FLUX_SHELL_RC_PATH, mpibind's way, is not read by the job
            # shell of flux-core 0.88 here: not set.
            env.prepend_path("PATH", join_path(self.prefix.libexec, "topobind"))
