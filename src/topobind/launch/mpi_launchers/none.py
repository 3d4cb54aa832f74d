"""No launcher: one process, started directly (its exact places exported to it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from topobind.launch.mpi_launchers.base import Found, Launch, Launcher, Native

if TYPE_CHECKING:
    from collections.abc import Sequence

    from topobind.launch.shape import JobShape, RankStep


class NoLauncher(Launcher):
    name = "none"
    help = "no launcher: one process (--ranks 1), its places exported to it"
    package = "nothing"
    reframe = "local"
    native = Native(
        masks="no (one process)",
        adds="OMP_PLACES of the one rank; with --verify-running, the per-rank step samples it",
    )

    def detect(self) -> Found | None:
        return Found("", "")

    def command(self, shape: JobShape, program: Sequence[str], step: RankStep) -> Launch:
        env, files, prefix = step.parts()
        return Launch(argv=[*prefix, *program], env=env, launcher="none", files=tuple(files))

    def plain(self, path: str | None, nodes: int, ranks: int, program: Sequence[str]) -> Launch:
        return Launch(argv=list(program), env={}, launcher=self.name)

    def command_groups(self, shape: JobShape, program: Sequence[str], step: RankStep) -> Launch:
        from topobind.errors import TopobindError

        raise TopobindError("--launcher none runs one process; the job spans several nodes")
