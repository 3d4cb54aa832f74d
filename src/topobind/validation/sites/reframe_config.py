"""ReFrame's ``site_configuration`` derived from every site file (the one source of truth
that ``site_configs/reframe_config.py`` hands to ReFrame)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from topobind.launch.mpi_launchers import reframe_name
from topobind.validation.sites.loading import load_site, reframe_results_dir, valid_sites
from topobind.validation.sites.model import BUILTIN_ENVIRONMENT, ExpectedNode, Site
from topobind.validation.sites.paths import REPO

#: set to 1 in the job of one node of ``validate --each-node`` (topobind.validation.bundles): the
#: site's Slurm partitions become ReFrame ``local`` partitions of the same name, so ReFrame runs
#: each check inside the node's allocation (topobind run's srun makes a step there), not as
#: a job of its own
IN_JOB_VARIABLE = "TOPOBIND_REFRAME_IN_JOB"


# --- ReFrame
def reframe_references(
    site: Site, check: str, variant: str
) -> dict[str, dict[str, tuple[float, float | None, float | None, str]]]:
    """ReFrame ``reference`` of one check variant: ``{'*': {metric: (ref, lower, upper,
    unit)}}`` from the site's targets, for every system and partition of the run (the site
    is chosen before the run: ``TOPOBIND_SITE`` or the system's name); ``{}`` without
    targets."""
    refs = {m: t.reframe_tuple() for m, t in site.targets_for(check, variant).items()}
    return {"*": refs} if refs else {}


def _processor(node: ExpectedNode | None) -> dict[str, int]:
    if node is None:
        return {}
    return {
        "num_cpus": node.cores * node.smt,
        "num_cpus_per_core": node.smt,
        "num_sockets": node.packages,
        "num_cpus_per_socket": node.cores * node.smt // node.packages,
    }


def reframe_site_configuration(
    directory: Path | None = None, results: Path | None = None, only: str | None = None
) -> dict[str, Any]:
    """ReFrame's ``site_configuration`` built from the site files (one source of truth):
    ``only`` that site (the one a topobind run names), else every valid one; an invalid
    site.yaml of another site never breaks the run (a line on stderr says it was left out)."""
    import os

    res = (results or reframe_results_dir()).resolve()
    if only:
        sites = [load_site(only, directory)]
    else:
        sites, broken = valid_sites(directory)
        for line in broken:
            print(f"topobind: warning: {line}", file=sys.stderr)
    # inside one node's job (validate --each-node's bundle, topobind.validation.bundles): the
    # checks run as processes of that job, their steps srun'ed into its allocation
    in_job = os.environ.get(IN_JOB_VARIABLE) == "1"
    systems: list[dict[str, Any]] = []
    environments: list[dict[str, Any]] = [
        {
            "name": BUILTIN_ENVIRONMENT.name,
            "cc": BUILTIN_ENVIRONMENT.cc,
            "cxx": BUILTIN_ENVIRONMENT.cxx,
            "ftn": BUILTIN_ENVIRONMENT.ftn,
            "cflags": list(BUILTIN_ENVIRONMENT.cflags),
            "cxxflags": list(BUILTIN_ENVIRONMENT.cflags),
            "features": ["openmp"],
            "extras": {"omp_flag": "-fopenmp"},
            # per system: replaces ReFrame's own 'builtin' without a redefinition warning
            "target_systems": [site.name for site in sites],
        }
    ]
    for site in sites:
        partitions = []
        for p in site.partitions:
            part: dict[str, Any] = {
                "name": p.name,
                "descr": p.description or f"{p.scheduler} scheduler, {p.launcher} launcher",
                "scheduler": "local" if in_job and p.scheduler == "slurm" else p.reframe_scheduler,
                "launcher": reframe_name(p.launcher),
                "access": list(p.access),
                "environs": list(p.environments),
                "max_jobs": p.max_jobs,
                "extras": {"exclusive": p.exclusive, "topobind_launcher": p.launcher},
            }
            if p.time_limit:
                part["time_limit"] = p.time_limit
            proc = _processor(site.node)
            if proc:
                part["processor"] = proc
            partitions.append(part)
        systems.append(
            {
                "name": site.name,
                "descr": site.description,
                "hostnames": list(site.hostnames),
                "modules_system": "nomod",
                "prefix": str(res / "work"),
                "partitions": partitions,
            }
        )
        for env in site.environments:
            environments.append(
                {
                    "name": env.name,
                    "cc": env.cc,
                    "cxx": env.cxx,
                    "ftn": env.ftn,
                    "cflags": list(env.cflags),
                    "modules": list(env.modules),
                    "env_vars": [[k, v] for k, v in env.env_vars.items()],
                    "features": ["openmp"],
                    "target_systems": [site.name],
                }
            )
    perflog_format = (
        "%(check_job_completion_time)s|%(check_system)s|%(check_partition)s|"
        "%(check_environ)s|%(check_display_name)s|%(check_jobid)s|%(check_result)s|"
        "%(check_perfvalues)s"
    )
    return {
        "systems": systems,
        "environments": environments,
        "logging": [
            {
                "level": "debug",
                "handlers": [
                    {"type": "stream", "name": "stdout", "level": "info", "format": "%(message)s"},
                    {
                        "type": "file",
                        "name": str(res / "logs" / "reframe.log"),
                        "level": "debug2",
                        "format": "[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s",
                        "append": True,
                    },
                ],
                "handlers_perflog": [
                    {
                        "type": "filelog",
                        "basedir": str(res / "perflogs"),
                        "prefix": "%(check_system)s/%(check_partition)s",
                        "level": "info",
                        "format": perflog_format,
                        "format_perfvars": (
                            "%(check_perf_var)s=%(check_perf_value)s %(check_perf_unit)s "
                            "(ref %(check_perf_ref)s, %(check_perf_lower_thres)s/"
                            "%(check_perf_upper_thres)s)|"
                        ),
                        "append": True,
                    }
                ],
            }
        ],
        "general": [
            {
                "check_search_path": [str(REPO / "reframe_tests")],
                "report_file": str(res / "reports" / "run-report-{sessionid}.json"),
                "compress_report": False,
                "clean_stagedir": True,
            }
        ],
        "storage": [{"enable": True, "sqlite_db_file": str(res / "results.db")}],
    }
