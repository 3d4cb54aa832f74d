"""Verification of GPU plans (layout per-gpu): the per-rank device variables
(``ranks[].env``) and the GPUs each rank's own runtime then shows.

The probe (kernels/bin/whereami) reports each rank's ``ROCR_VISIBLE_DEVICES``,
``CUDA_VISIBLE_DEVICES``, ``CUDA_DEVICE_ORDER``, ``ZE_AFFINITY_MASK``,
``ZE_FLAT_DEVICE_HIERARCHY`` and ``UCX_NET_DEVICES`` in ``params.device_env``, and in
``params.gpu_runtimes`` the devices its CUDA driver (``libcuda.so.1``) and HIP
(``libamdhip64``), each loaded at run time in a child bounded in time
(``TOPOBIND_GPU_PROBE_TIMEOUT`` seconds), show it: bus id and
UUID (or why a device could not be read), in the runtime's order. Local rank *i* of a host
(the host's ranks in rank order, as in :mod:`topobind.launch.verify`) must see exactly the
variables of the plan's rank *i*, and its own vendor's runtime (HIP for a rank the plan
gives ``ROCR_VISIBLE_DEVICES``, CUDA for ``CUDA_VISIBLE_DEVICES``) exactly the plan's GPUs
of that rank, in the plan's order (device 0 is the first): OK; MISMATCH naming both bus
ids, or the runtime's error code and name (any failure of the runtime: an error, a call
that did not answer in time or crashed, a device it could not read, an absurd count, a
library the loader refused); UNVERIFIABLE only when no runtime library of that vendor is
there (no driver on this node, CUDA's stub library, or the MPI build of the probe), never
OK then. NVML is not asked: it ignores ``CUDA_VISIBLE_DEVICES`` and is not what the
program sees. Everything a probe printed is escaped and bounded before it is shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from topobind.errors import TopobindError
from topobind.plan.model import PlannedRank
from topobind.topo.gpus import bus_id, listed, shown
from topobind.topo.topology import load

VARIABLES = (
    "ROCR_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "ZE_AFFINITY_MASK",
    "ZE_FLAT_DEVICE_HIERARCHY",
    "UCX_NET_DEVICES",
)
RUNTIME = "GPU runtime"  # the variable column of a runtime row
#: cuInit's answers that are about the rank's device variables, not the driver (measured on
#: an H200 node: tests/launch/data/cuda-visible-h200.tsv): the rank's GPUs are not as planned
_REFUSED = {
    100: "cuda sees no GPU (CUDA_ERROR_NO_DEVICE): CUDA_VISIBLE_DEVICES names none it may use",
    101: "cuda refused the device variables (CUDA_ERROR_INVALID_DEVICE): an index listed twice "
    "in CUDA_VISIBLE_DEVICES, or CUDA_DEVICE_ORDER not FASTEST_FIRST or PCI_BUS_ID",
}
MAX_SEEN = 64  # devices read from a runtime (the probe's TB_MAX_GPUS)
CUDA_STUB = 34  # CUDA_ERROR_STUB_LIBRARY: the toolkit's stub libcuda, no driver
HIP_NO_DEVICE = 100  # hipErrorNoDevice


@dataclass(frozen=True)
class EnvRow:
    """A device variable of a rank (planned, seen), or its runtime's GPUs (``variable`` is
    :data:`RUNTIME`, ``status`` OK/MISMATCH/UNVERIFIABLE, ``note`` why or what else)."""

    rank: int
    host: str
    variable: str
    planned: str | None
    seen: str | None
    status: str = ""  # "": OK when planned == seen
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.status != "MISMATCH" if self.status else self.planned == self.seen

    @property
    def verdict(self) -> str:
        return self.status or ("OK" if self.planned == self.seen else "MISMATCH")


def _rank_of(doc: dict[str, Any], lineno: int) -> int:
    rank = doc.get("rank", 0)
    if type(rank) is not int or rank < 0:
        raise TopobindError(
            f'probe output line {lineno}: "rank" must be a whole number, got '
            f"{repr(rank)[:40]}; the probe's output is corrupt"
        )
    return rank


def probe_envs(text: str) -> dict[tuple[str, int], dict[str, str | None]]:
    """(host, rank) -> the device variables that rank reported."""
    from topobind.launch.verify import probe_documents

    out: dict[tuple[str, int], dict[str, str | None]] = {}
    for lineno, doc in probe_documents(text):
        params = doc.get("params")
        env = params.get("device_env") if isinstance(params, dict) else None
        if isinstance(env, dict):
            out[(str(doc.get("host", "?")), _rank_of(doc, lineno))] = {
                k: v if isinstance(v, str) else None for k, v in env.items()
            }
    return out


class Seen:
    """What one of a rank's GPU runtimes showed: ``api`` (cuda, hip; None: no library found,
    ``missing`` then says which), ``loaded`` (False: the loader refused the library, ``error``
    says why), ``error`` and ``code`` of the call that failed, ``count`` (the runtime's
    device count), and its devices as (bus id, UUID, why unreadable) in the runtime's order."""

    def __init__(self, block: object, missing: str = "") -> None:
        block = block if isinstance(block, dict) else {}
        api, error, devices = block.get("api"), block.get("error"), block.get("devices")
        self.api = shown(api, 20) if isinstance(api, str) else None
        self.missing = missing
        self.loaded = block.get("loaded") is not False
        self.error = shown(error, 160) if isinstance(error, str) else None
        code, count = block.get("code"), block.get("count")
        self.code = code if type(code) is int else None
        self.count = count if type(count) is int else None
        self.devices: list[tuple[str, str | None, str | None]] = []
        for d in devices[:MAX_SEEN] if isinstance(devices, list) else []:
            d = d if isinstance(d, dict) else {}
            raw, uuid, why = d.get("pci"), d.get("uuid"), d.get("error")
            pci = bus_id(raw) if isinstance(raw, str) else None
            ok_uuid = isinstance(uuid, str) and len(uuid) <= 64
            ok_uuid = ok_uuid and uuid.isascii() and uuid.isprintable()
            unreadable = shown(why, 100) if isinstance(why, str) else None
            if pci is None and unreadable is None:
                text = raw if isinstance(raw, str) else ""
                unreadable = (
                    f"bus id {shown(text, 40)!r}: not DDDD:BB:DD.F" if text else "no bus id"
                )
            self.devices.append((pci or "?", uuid if ok_uuid else None, unreadable))


_LIBRARY = {"cuda": "libcuda.so.1", "hip": "libamdhip64"}
_LIBRARIES = ", ".join(_LIBRARY.values())
_VENDOR = {"cuda": "NVIDIA", "hip": "AMD"}


def pick(runtimes: Sequence[Seen], api: str | None) -> Seen:
    """The runtime that judges a rank planned on GPUs of ``api`` (cuda: NVIDIA, hip: AMD;
    None: the first that answered): each rank by its own vendor's runtime."""
    if api is None or not runtimes:
        return runtimes[0] if runtimes else Seen(None)
    found = next((s for s in runtimes if s.api == api), None)
    if found is not None:
        return found
    others = ", ".join(s.api or "?" for s in runtimes)
    why = f"no {_LIBRARY[api]} on this node for its {_VENDOR[api]} GPUs" + (
        f" ({others} not asked: another vendor's runtime)" if others else ": no driver"
    )
    return Seen(None, why)


def probe_runtimes(text: str) -> dict[tuple[str, int], list[Seen]]:
    """(host, rank) -> what each GPU runtime of that rank showed (``gpu_runtimes``; an
    older probe's one ``gpu_runtime`` block; none: an MPI probe, or no library)."""
    from topobind.launch.verify import probe_documents

    out: dict[tuple[str, int], list[Seen]] = {}
    for lineno, doc in probe_documents(text):
        params = doc.get("params")
        if isinstance(params, dict) and isinstance(params.get("device_env"), dict):
            blocks = params.get("gpu_runtimes")
            if not isinstance(blocks, list):
                old = params.get("gpu_runtime")
                blocks = [old] if isinstance(old, dict) and old.get("api") else []
            seen = [Seen(b) for b in blocks[:4] if isinstance(b, dict)]
            out[(str(doc.get("host", "?")), _rank_of(doc, lineno))] = seen
    return out


def _failed(seen: Seen) -> tuple[str, str]:
    """(status, why) of a runtime that listed no device and said why."""
    if seen.api == "cuda" and (seen.code or 0) in _REFUSED:
        return "MISMATCH", _REFUSED[seen.code or 0]
    if seen.api == "cuda" and seen.code == CUDA_STUB:
        why = "libcuda.so.1 is CUDA's stub library (CUDA_ERROR_STUB_LIBRARY): no driver"
        return "UNVERIFIABLE", why
    if seen.api == "hip" and seen.code == HIP_NO_DEVICE:
        why = "hip sees no GPU (hipErrorNoDevice): ROCR_VISIBLE_DEVICES names none it may use"
        return "MISMATCH", why
    return "MISMATCH", f"{seen.api}: {seen.error or 'its library did not load'}"


def runtime_row(rank: int, host: str, planned: Sequence[str], seen: Seen) -> EnvRow:
    """The runtime's GPUs of one rank against its planned bus ids, in order. OK only when it
    listed exactly those; UNVERIFIABLE only when no runtime library is there at all (or
    CUDA's stub); a runtime that failed, hung, crashed or could not read a device: MISMATCH."""
    want = ",".join(planned)
    got = ",".join(pci for pci, _, _ in seen.devices)
    uuids = ",".join(u for _, u, _ in seen.devices if u)
    if seen.api is None:
        why = seen.missing or f"no GPU runtime library ({_LIBRARIES}) on this node: no driver"
        return EnvRow(rank, host, RUNTIME, want, None, "UNVERIFIABLE", why)
    if seen.error or not seen.loaded:
        status, why = _failed(seen)
        return EnvRow(rank, host, RUNTIME, want, None, status, why)
    if seen.count is not None and seen.count > MAX_SEEN:
        why = f"{seen.api} counts {seen.count} devices (more than {MAX_SEEN}: not believed)"
        return EnvRow(rank, host, RUNTIME, want, got or None, "MISMATCH", why)
    bad = [f"device {i} unreadable ({e})" for i, (_, _, e) in enumerate(seen.devices) if e]
    if bad:
        why = f"{seen.api} {listed(bad, 2)}"
        return EnvRow(rank, host, RUNTIME, want, got or None, "MISMATCH", why)
    if got == want:
        return EnvRow(rank, host, RUNTIME, want, got, "OK", uuids)
    first = seen.devices[0][0] if seen.devices else "none"
    why = f"{seen.api} device 0 is {first}, planned {planned[0] if planned else 'none'}"
    return EnvRow(rank, host, RUNTIME, want, got or None, "MISMATCH", why)


def _apis_of(plan: PlannedRank) -> tuple[str, ...]:
    """The runtimes of the rank's GPUs, from the variables the plan sets for it."""
    names = (("cuda", "CUDA_VISIBLE_DEVICES"), ("hip", "ROCR_VISIBLE_DEVICES"))
    return tuple(api for api, name in names if name in plan.env)


def _judged(rank: int, host: str, plan: PlannedRank, runtimes: list[Seen]) -> EnvRow:
    """The runtime row of one rank, by its own vendor's runtime; a rank with GPUs of both
    vendors by both (each must answer; together they list exactly its GPUs)."""
    apis = _apis_of(plan)
    if not apis and "ZE_AFFINITY_MASK" in plan.env:
        why = "the probe asks CUDA and HIP, not Level Zero: Intel GPUs are not verified"
        return runtime_row(rank, host, plan.gpus, Seen(None, why))
    if len(apis) < 2:
        return runtime_row(rank, host, plan.gpus, pick(runtimes, apis[0] if apis else None))
    seen = [pick(runtimes, api) for api in apis]
    failed = [s for s in seen if s.api is None or s.error or not s.loaded]
    if failed:
        return runtime_row(rank, host, plan.gpus, failed[0])
    both = Seen({"api": "+".join(apis)})
    both.devices = [d for s in seen for d in s.devices]
    got = sorted(pci for pci, _, _ in both.devices)
    if got == sorted(plan.gpus) and not any(e for _, _, e in both.devices):
        uuids = ",".join(u for _, u, _ in both.devices if u)
        listed_ = ",".join(pci for pci, _, _ in both.devices)
        return EnvRow(rank, host, RUNTIME, ",".join(plan.gpus), listed_, "OK", uuids)
    return runtime_row(rank, host, plan.gpus, both)


def check_env(planned: list[PlannedRank], probe_text: str) -> list[EnvRow]:
    """One row per planned variable of every rank the probe reported, and one for the GPUs
    its runtime showed (empty when the plan sets no variable). A host's ranks beyond the
    plan's get none: the CPU check reports them (UNPLANNED)."""
    if not any(p.env for p in planned):
        return []
    names = sorted({k for p in planned for k in p.env})
    seen = probe_envs(probe_text)
    runtimes = probe_runtimes(probe_text)
    by_host: dict[str, list[int]] = {}
    for host, rank in seen:
        by_host.setdefault(host, []).append(rank)
    rows: list[EnvRow] = []
    for host, ranks in sorted(by_host.items()):
        for local, rank in enumerate(sorted(ranks)[: len(planned)]):
            plan = planned[local]
            got = seen[(host, rank)]
            for name in names:
                rows.append(EnvRow(rank, host, name, plan.env.get(name), got.get(name)))
            buses = plan.gpus
            if buses:
                row = _judged(rank, host, plan, runtimes.get((host, rank), []))
                rows.append(_with_numa_note(row, plan))
    rows.sort(key=lambda r: (r.rank, r.host, r.variable == RUNTIME, r.variable))
    return rows


def _with_numa_note(row: EnvRow, plan: PlannedRank) -> EnvRow:
    """A rank whose CPUs and GPU sit on different NUMA nodes gets a note (as hpcat prints)."""
    if row.status != "OK":
        return row
    try:
        topo = _live()
    except Exception:  # noqa: BLE001 - a note only
        return row
    cpu_numa = {n.os_index for n in topo.numa_nodes if set(n.pus) & set(plan.cpus)}
    far = [
        f"GPU {g.pci} on NUMA {','.join(map(str, g.numa))}"
        for g in topo.devices.gpus
        if g.pci in plan.gpus and g.numa and not set(g.numa) & cpu_numa
    ]
    if not far:
        return row
    numa = f"CPUs on NUMA {','.join(map(str, sorted(cpu_numa)))}, {'; '.join(far)}"
    note = f"{row.note}; {numa}" if row.note else numa
    return EnvRow(row.rank, row.host, row.variable, row.planned, row.seen, row.status, note)


_LIVE: list[Any] = []


def _live() -> Any:
    if not _LIVE:
        _LIVE.append(load("live"))
    return _LIVE[0]


def env_table(rows: list[EnvRow], why: str = "") -> str:
    lines = [f"{'rank':>4}  {'host':<10} {'variable':<24} {'planned':<14} {'seen':<14} status"]
    for r in rows:
        if r.variable == RUNTIME:
            continue
        lines.append(
            f"{r.rank:>4}  {shown(r.host, 40):<10} {r.variable:<24} "
            f"{shown(r.planned or '(unset)', 400):<14} {shown(r.seen or '(unset)', 400):<14} "
            f"{r.verdict}"
        )
    runtime = [r for r in rows if r.variable == RUNTIME]
    if runtime:
        lines.append(f"{'rank':>4}  {'host':<10} {'GPUs planned':<14} {'runtime saw':<14} status")
        for r in runtime:
            lines.append(
                f"{r.rank:>4}  {shown(r.host, 40):<10} {r.planned or '-':<14} "
                f"{r.seen or '(none)':<14} "
                f"{r.verdict}" + (f"  {r.note}" if r.note else "")
            )
    env = [r for r in rows if r.variable != RUNTIME]
    bad = sum(1 for r in env if not r.ok)
    lines.append(
        f"{len(env) - bad} of {len(env)} device variables as planned"
        + (f"; {bad} not" if bad else "")
    )
    if runtime:
        counts = {s: sum(1 for r in runtime if r.verdict == s) for s in ("OK", "MISMATCH")}
        unknown = len(runtime) - counts["OK"] - counts["MISMATCH"]
        lines.append(
            f"GPU runtime: {counts['OK']} of {len(runtime)} ranks saw their planned GPUs"
            + (f"; {counts['MISMATCH']} MISMATCH" if counts["MISMATCH"] else "")
            + (f"; {unknown} UNVERIFIABLE{why}" if unknown else "")
        )
    return "\n".join(lines)


def why_variables_only() -> str:
    """Why the runtime could not be checked, for the table (this node's GPUs, from hwloc)."""
    try:
        gpus = _live().devices.gpus
    except Exception:  # noqa: BLE001 - the note only
        return ""
    return " (this node has no GPU)" if not gpus else f" ({len(gpus)} GPUs on this node)"
