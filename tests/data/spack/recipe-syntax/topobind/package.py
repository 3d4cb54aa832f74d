# Broken on purpose: a missing colon.
# spack: cannot load package 'topobind' from the 'topobind' repository: expected ':'
# hint: the recipe is not valid Python
from spack.package import *


class Topobind(Package):
    def install(self, spec, prefix)
        make("-C", "kernels", "install")
