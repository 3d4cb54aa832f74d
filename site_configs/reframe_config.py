"""ReFrame configuration of topobind, derived from every site_configs/<site>/site.yaml.

  reframe -C site_configs/reframe_config.py -c reframe_tests --system local:default -t quick -r

One source of truth: systems, partitions, environments and references all come from the
site files (topobind.validation.sites); this file only hands the result to ReFrame. Results
(reports, perflogs, the results database for --performance-compare, stage and output directories) go
to $TOPOBIND_REFRAME_RESULTS (default: results/reframe/ of the repository). The site files
are read from $TOPOBIND_SITES_DIR (default: site_configs/). A relative value of either is
ignored, as topobind ignores it (topobind.paths.location): ReFrame may run in another directory.
"""

import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
try:
    import topobind.validation.sites  # noqa: F401
except ImportError:  # running from a checkout without 'pip install -e .'
    sys.path.insert(0, os.path.join(_REPO, "src"))

from topobind.validation.sites import reframe_results_dir, reframe_site_configuration  # noqa: E402


def _squeue_without_the_wait() -> None:
    """ReFrame's 'squeue' backend (a Slurm partition without sacct, ``accounting: false``, as
    the local cluster's) sleeps until 2 s after the last submission before each poll
    (SQUEUE_DELAY), as it takes a job that squeue does not list for finished and a job just
    submitted might not be listed yet. With one job at a time (max_jobs 1, ``validate
    --each-node`` on the local cluster) that is 2 s a job whatever the job does (an empty job
    is done in 0.9 s; HugepagesCheck, 0.3 s of work, took 2.1 s). This subclass, registered
    under the same name, asks ``squeue -t all``, which lists a finished job as COMPLETED,
    FAILED, TIMEOUT ... while slurmctld keeps it (MinJobAge, 300 s by default), so it need not
    wait; a job that squeue does not list at all is still taken for finished only 2 s after
    its submission, as before."""
    import re
    import time

    try:  # ReFrame's internals (pinned 4.10): another version keeps its own backend
        import reframe.utility.osext as osext
        from reframe.core import backends
        from reframe.core.schedulers.slurm import SqueueJobScheduler

        if not isinstance(getattr(backends, "_schedulers", None), dict):
            return
    except ImportError:
        return

    class Squeue(SqueueJobScheduler):  # type: ignore[misc]
        def poll(self, *jobs):  # type: ignore[no-untyped-def]
            jobs = [job for job in jobs if job is not None]
            if not jobs:
                return
            ids = ",".join(job.jobid for job in jobs)
            done = osext.run_command(f'{self._squeue} -h -t all -j {ids} -o "%%i|%%T|%%N|%%r"')
            listed: dict[str, list[re.Match[str]]] = {}
            for m in re.finditer(
                rf"^(?P<jobid>{self._jobid_patt})\|(?P<state>\S+)\|(?P<nodespec>\S*)\|"
                r"(?P<reason>.+)", done.stdout, re.MULTILINE,
            ):  # fmt: skip
                listed.setdefault(m.group("jobid").split("_")[0], []).append(m)
            now = time.time()
            for job in jobs:
                found = listed.get(job.jobid)
                if found is None:  # not listed (yet, or any more): finished once 2 s old
                    if now - job.submit_time >= self.SQUEUE_DELAY:
                        job._state = "CANCELLED" if job.is_cancelling else "COMPLETED"
                    continue
                job._state = ",".join(m.group("state") for m in found)
                job._nodespec = ",".join(m.group("nodespec") for m in found)
            reasons = {i: [m.group("reason") for m in ms] for i, ms in listed.items()}
            self._cancel_if_blocked(jobs, reasons)
            self._cancel_if_pending_too_long(jobs)

    # the same name: the reports and the checks see 'squeue', as before
    backends._schedulers["squeue"] = (Squeue, None)  # noqa: SLF001


_squeue_without_the_wait()
os.makedirs(os.path.join(reframe_results_dir(), "logs"), exist_ok=True)
# every valid site file: an invalid site.yaml of another site is left out with a warning and
# never breaks this run (issue 37 item 21)
site_configuration = reframe_site_configuration()
