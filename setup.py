"""The parts of the build pyproject.toml cannot say: the repository's ``topologies/`` (sample
hwloc XMLs and synthetic lines, read by the tests and the docs' examples) copied into the
built package as ``topobind/topologies``, so a wheel has the documented examples' files too.
An editable install keeps the plain ``src/`` path (no import hook: start-up is measured) and
reads the checkout's ``topologies/``."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            shutil.copytree(
                HERE / "topologies",
                Path(self.build_lib) / "topobind" / "topologies",
                dirs_exist_ok=True,
            )


setup(cmdclass={"build_py": BuildPy})
