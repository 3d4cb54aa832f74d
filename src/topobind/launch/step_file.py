"""The per-rank step file that rankstep/rankexec.c (and the SPANK plugin) reads: written once,
from sections of (hosts, plan) with each rank's CPU mask passed in (:func:`planned_masks`:
each rank's planned CPUs, what srun's ``--cpu-bind=mask_cpu`` gives); no launcher is
consulted here.

The format (see rankstep/rankexec.c): a header line, a comment, an optional ``%sample DIR
MS``, then per section an optional comment, ``@HOSTS`` (``@*``: every host) and one line per
local rank: ``RANK<TAB>[%cpus=LIST<TAB>][%mem=...<TAB>%thp=off<TAB>%preload=LIB<TAB>]``
``NAME=VALUE...``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from topobind.emit.omp import rank_env
from topobind.errors import TopobindError
from topobind.plan.model import Plan, RankPlan
from topobind.topo.topology import format_list

RANK_STEP_HEADER = "topobind-rankexec 1"
#: Version 2 adds ``%cpus=LIST`` fields: rankexec binds the rank itself (a rankexec built
#: before it refuses the file instead of ignoring the binding).
RANK_STEP_HEADER_BIND = "topobind-rankexec 2"
#: Version 3 adds the memory fields ``%mem=POLICY:NODES``, ``%thp=off``, ``%preload=LIB``
#: (:func:`topobind.plan.memory.step_fields`); used only when a line has one.
RANK_STEP_HEADER_MEM = "topobind-rankexec 3"
#: Fields a rank's line may have after its rank (TB_STEP_MAX_FIELDS, libtb/include/tb/step.h).
MAX_FIELDS = 65536
#: Bytes a value may not hold: the readers refuse every control byte but the TAB between
#: fields (tb_step_check_text), so a TAB, a newline, a NUL, a CR... is refused here first.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Section:
    """The lines of the hosts ``hosts`` (``("*",)``: every host): one per local rank of
    ``plan``, each binding its rank to its mask in ``masks`` (None: no ``%cpus=``);
    ``comment``: a ``#`` line before the section (None: none)."""

    hosts: tuple[str, ...]
    plan: Plan
    masks: tuple[tuple[int, ...], ...] | None = None
    comment: str | None = None


def planned_masks(plan: Plan) -> tuple[tuple[int, ...], ...]:
    """Each local rank's planned CPUs: the ``%cpus=`` masks of a step file that binds (the
    set srun's ``--cpu-bind=mask_cpu`` gives a rank, tests/launch/test_rank_step.py)."""
    return tuple(r.cpus for r in plan.ranks)


def step_text(
    about: str,
    sections: Sequence[Section],
    env: Mapping[str, str] | None = None,
    sample: tuple[str, int] | None = None,
) -> str:
    """The step file: ``about`` in its first comment, ``env`` added to every rank's variables,
    ``sample`` (directory, ms) for ``%sample``. Version 2 when a section binds, version 3
    when a line carries memory fields (an older rankexec then refuses the file instead of
    ignoring what it cannot apply)."""
    _one_line_per_rank(sections)
    bind = any(s.masks is not None for s in sections)
    lines = [RANK_STEP_HEADER_BIND if bind else RANK_STEP_HEADER, f"# {about}"]
    if sample is not None:
        lines.append(f"%sample {sample[0]} {sample[1]}")
    for s in sections:
        if s.comment is not None:
            lines.append(f"# {s.comment}" if s.comment else "#")
        lines.append("@" + ",".join(s.hosts))
        lines += _rank_lines(s.plan, s.masks, env or {})
    if any("\t%mem=" in ln or "\t%thp=" in ln or "\t%preload=" in ln for ln in lines[1:]):
        lines = [RANK_STEP_HEADER_MEM, *lines[1:]]
    for i, line in enumerate(lines, 1):  # comments, host names, the sample directory too
        bad = _CONTROL.search(line.replace("\t", " "))
        if bad:
            raise TopobindError(
                f"the step file's line {i} would hold the control character "
                f"{bad.group()!r} ({line[:40]!r}); the readers refuse it: rename what holds it"
            )
    return "\n".join(lines) + "\n"


def _one_line_per_rank(sections: Sequence[Section]) -> None:
    """The reader refuses a rank with two lines where they apply (docs/step-file.md): never
    write one (a host in two sections, two ``@*`` sections, a rank twice in a plan)."""
    seen: set[str] = set()
    for s in sections:
        twice = seen & set(s.hosts)
        ranks = [r.rank for r in s.plan.ranks]
        if twice or len(set(ranks)) != len(ranks):
            what = f"host {sorted(twice)[0]}" if twice else "a rank"
            raise TopobindError(f"internal: the step file would give {what} two sections")
        seen |= set(s.hosts)


def _rank_lines(
    plan: Plan, masks: Sequence[tuple[int, ...]] | None, extra: Mapping[str, str]
) -> list[str]:
    """``RANK<TAB>[%cpus=MASK<TAB>]NAME=VALUE...`` for each local rank of ``plan``."""
    lines = []
    for i, r in enumerate(plan.ranks):
        env = {**rank_env(plan, r.rank), **extra}
        for k, v in env.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) or _CONTROL.search(v):
                raise TopobindError(
                    f"per-rank variable {k[:40]}={v[:40]!r} cannot be passed on (a name of "
                    "letters, digits and '_'; a value without control characters)"
                )
        fields = [str(r.rank), *([f"%cpus={format_list(masks[i])}"] if masks is not None else [])]
        fields += _memory_fields(plan, r)
        if len(fields) - 1 + len(env) > MAX_FIELDS:
            raise TopobindError(
                f"rank {r.rank}: {len(fields) - 1 + len(env):,} fields on its line, more than "
                f"the step file's {MAX_FIELDS:,}; pass fewer variables"
            )
        lines.append("\t".join([*fields, *(f"{k}={v}" for k, v in env.items())]))
    return lines


def _memory_fields(plan: Plan, rank: RankPlan) -> list[str]:
    """The rank's memory fields (``%mem=``, ``%thp=``, ``%preload=`` and the shim's
    variables; :func:`topobind.plan.memory.step_fields`)."""
    if rank.memory is None:
        return []
    from topobind.plan.memory import step_fields, uses_shim

    shim = None
    if uses_shim(plan):
        from topobind.measure.programs import HUGEPAGE_SHIM, find_kernel

        shim = str(find_kernel(HUGEPAGE_SHIM))
    return step_fields(plan, rank, shim)
