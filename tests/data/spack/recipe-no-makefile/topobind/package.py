# Broken on purpose: there is no kernel/ directory (it is kernels/).
# expect: make -C kernel: kernel/Makefile does not exist; the recipe's build runs it
from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import *


class Topobind(MakefilePackage):
    """Test recipe."""

    git = "https://example.invalid/topobind.git"

    version("main", branch="main")

    def build(self, spec, prefix):
        make("-C", "kernel")
