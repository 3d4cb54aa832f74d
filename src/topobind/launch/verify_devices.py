"""Verification of the per-rank device variables of GPU plans (``ranks[].env``).

The probe (kernels/bin/whereami) reports each rank's ``ROCR_VISIBLE_DEVICES``,
``CUDA_VISIBLE_DEVICES``, ``ZE_AFFINITY_MASK`` and ``UCX_NET_DEVICES`` in
``params.device_env``. Local rank *i* of a host (the host's ranks in rank order, as in
:mod:`topobind.launch.verify`) must see exactly the values of the plan's rank *i*. The probe does
not open a GPU runtime, so what is checked is the variables, not the device the runtime
then shows; the report says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from topobind.errors import TopobindError
from topobind.plan.model import PlannedRank
from topobind.topo.topology import load

VARIABLES = ("ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "UCX_NET_DEVICES")
SCOPE_NOTE = (
    "device variables checked as set per rank; the probe does not open a GPU runtime, so the "
    "device each rank then sees is not checked{why}"
)


@dataclass(frozen=True)
class EnvRow:
    rank: int
    host: str
    variable: str
    planned: str | None
    seen: str | None

    @property
    def ok(self) -> bool:
        return self.planned == self.seen


def probe_envs(text: str) -> dict[tuple[str, int], dict[str, str | None]]:
    """(host, rank) -> the device variables that rank reported."""
    from topobind.launch.verify import probe_documents

    out: dict[tuple[str, int], dict[str, str | None]] = {}
    for lineno, doc in probe_documents(text):
        params = doc.get("params")
        env = params.get("device_env") if isinstance(params, dict) else None
        if isinstance(env, dict):
            rank = doc.get("rank", 0)
            if type(rank) is not int or rank < 0:
                raise TopobindError(
                    f'probe output line {lineno}: "rank" must be a whole number, got '
                    f"{repr(rank)[:40]}; the probe's output is corrupt"
                )
            out[(str(doc.get("host", "?")), rank)] = {
                k: v if isinstance(v, str) else None for k, v in env.items()
            }
    return out


def check_env(planned: list[PlannedRank], probe_text: str) -> list[EnvRow]:
    """One row per planned variable of every rank the probe reported (empty when the plan
    sets no variable)."""
    if not any(p.env for p in planned):
        return []
    names = sorted({k for p in planned for k in p.env})
    seen = probe_envs(probe_text)
    by_host: dict[str, list[int]] = {}
    for host, rank in seen:
        by_host.setdefault(host, []).append(rank)
    rows: list[EnvRow] = []
    for host, ranks in sorted(by_host.items()):
        for local, rank in enumerate(sorted(ranks)):
            want = planned[local % len(planned)].env
            got = seen[(host, rank)]
            for name in names:
                rows.append(EnvRow(rank, host, name, want.get(name), got.get(name)))
    rows.sort(key=lambda r: (r.rank, r.host, r.variable))
    return rows


def env_table(rows: list[EnvRow], why: str = "") -> str:
    lines = [f"{'rank':>4}  {'host':<10} {'variable':<22} {'planned':<12} {'seen':<12} status"]
    for r in rows:
        lines.append(
            f"{r.rank:>4}  {r.host:<10} {r.variable:<22} {r.planned or '(unset)':<12} "
            f"{r.seen or '(unset)':<12} {'OK' if r.ok else 'MISMATCH'}"
        )
    bad = sum(1 for r in rows if not r.ok)
    lines.append(
        f"{len(rows) - bad} of {len(rows)} device variables as planned"
        + (f"; {bad} not" if bad else "")
    )
    lines.append("note: " + SCOPE_NOTE.format(why=why))
    return "\n".join(lines)


def why_variables_only() -> str:
    """Why only the variables are checked, for the note (this node's GPUs, from hwloc)."""
    try:
        gpus = load("live").devices.gpus
    except Exception:  # noqa: BLE001 - the note only
        return ""
    return " (this node has no GPU)" if not gpus else f" ({len(gpus)} GPUs on this node)"
