"""How many Slurm jobs this run may have queued at once (``validate --each-node``, one job a
node): the least of the site's ``max_submit`` setting, slurmctld's ``MaxJobCount`` (``scontrol
show config``) and, where accounting exists, the user's association and QOS ``MaxSubmitJobs``
and ``MaxJobs`` (``sacctmgr``), less the jobs the user has queued already.

Every call to Slurm has a time bound (:data:`TIMEOUT_S`) and a size bound (the first
:data:`MAX_OUTPUT` characters are read); a query that fails or times out bounds nothing and
says so in :attr:`Limits.notes`.
"""

from __future__ import annotations

import getpass
import subprocess
from dataclasses import dataclass, field

from topobind.errors import TopobindError

TIMEOUT_S = 30
MAX_OUTPUT = 1 << 20
UNLIMITED = 1 << 31  # Slurm prints no limit as an empty field, -1 or 4294967295


@dataclass
class Limits:
    """The bounds found, {source: jobs}, and what could not be read."""

    bounds: dict[str, int] = field(default_factory=dict)
    queued: int = 0  # jobs of this user in the queue already (pending or running)
    notes: list[str] = field(default_factory=list)

    @property
    def tightest(self) -> tuple[str, int] | None:
        return min(self.bounds.items(), key=lambda kv: kv[1]) if self.bounds else None

    @property
    def free(self) -> int | None:
        """Jobs this run may add to the queue; None: no bound known."""
        t = self.tightest
        return None if t is None else max(0, t[1] - self.queued)


def max_submit_setting(value: object, where: str) -> int:
    """The site setting ``max_submit``: a whole number of jobs, in the range the site schema
    checks (the catalogue's ``max_submit``, one range for both and their messages)."""
    from topobind.validation.sites.catalogue import OWN_SETTINGS
    from topobind.validation.sites.schema import setting_value_problem

    problem = setting_value_problem(OWN_SETTINGS["max_submit"], value)
    if problem or not str(value).strip():
        why = problem or "give a whole number"
        raise TopobindError(f"{where}: max_submit {str(value)[:40]!r} is not a number of jobs; "
                            f"{why} (e.g. max_submit: 500)")  # fmt: skip
    return int(str(value).strip())


def _query(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout[:MAX_OUTPUT] if done.returncode == 0 else None


def _number(text: str) -> int | None:
    text = text.strip()
    if not text.isdigit() or not text.isascii():
        return None
    n = int(text)
    return None if n in (0, 4294967295) or n >= UNLIMITED else n


def parse_config(text: str) -> dict[str, str]:
    """``Key = value`` lines of ``scontrol show config``."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out


def parse_sacctmgr(text: str, what: str) -> dict[str, int]:
    """{'WHAT MaxSubmitJobs': n, 'WHAT MaxJobs': n} of ``sacctmgr -nP show ... format=
    MaxSubmitJobs,MaxJobs`` (the least over its lines; an empty field: no limit)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split("|")
        for name, value in zip(("MaxSubmitJobs", "MaxJobs"), fields, strict=False):
            n = _number(value)
            key = f"{what} {name}"
            if n is not None and n < out.get(key, UNLIMITED):
                out[key] = n
    return out


def read_limits(setting: object | None, where: str) -> Limits:
    """The bounds of this user's queue (the module docstring)."""
    lim = Limits()
    if setting is not None:
        lim.bounds[f"max_submit in {where}"] = max_submit_setting(setting, where)
    conf = _query(["scontrol", "show", "config"])
    if conf is None:
        lim.notes.append("scontrol show config did not answer: slurmctld's MaxJobCount unknown")
        conf_map: dict[str, str] = {}
    else:
        conf_map = parse_config(conf)
        n = _number(conf_map.get("MaxJobCount", ""))
        if n is not None:
            lim.bounds["slurmctld MaxJobCount"] = n
    if conf_map.get("AccountingStorageType", "accounting_storage/none") not in (
        "accounting_storage/none", ""):  # fmt: skip
        user = getpass.getuser()
        for what, argv in (
            ("association", ["sacctmgr", "-nP", "show", "assoc", f"user={user}",
                             "format=MaxSubmitJobs,MaxJobs"]),
            ("QOS", ["sacctmgr", "-nP", "show", "qos", "format=MaxSubmitJobsPerUser,"
                     "MaxJobsPerUser"]),
        ):  # fmt: skip
            text = _query(argv)
            if text is None:
                lim.notes.append(f"sacctmgr show {what} did not answer: its limits unknown")
            else:
                lim.bounds |= parse_sacctmgr(text, what)
    queued = _query(["squeue", "-h", "-u", getpass.getuser(), "-t", "PD,R,CG", "-o", "%i"])
    lim.queued = len(queued.split()) if queued else 0
    return lim


def describe(lim: Limits) -> str:
    """One line: the tightest bound, its source, and the jobs queued already."""
    t = lim.tightest
    if t is None:
        return "no limit on queued jobs known"
    return f"at most {t[1]} jobs queued ({t[0]}; {lim.queued} queued by this user already)"
