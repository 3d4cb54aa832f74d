"""Site descriptions (``site_configs/<site>/site.yaml``) and the ReFrame configuration derived
from them.

A site file says how a site's hosts are recognised (host name regular expressions), which
partitions it has (scheduler, launcher, access options, environments, concurrent jobs), the
node it expects (packages, NUMA nodes, L3 domains, cores, SMT), how many free 1 GiB pages the
checks need, and the performance targets of every check and variant: a reference value,
a tolerance (fractions, ``lower <= 0 <= upper``, as in ReFrame's reference tuples), a unit
and where the number comes from (``measured`` by calibration, or ``quoted`` from a named
source). Measured targets may live in a separate ``references.yaml`` written by
``topobind calibrate``; its targets override those of ``site.yaml``.

Files are checked against ``schemas/site.schema.json`` and a few rules the schema cannot
express; every problem is reported as ``FILE: PATH: what is wrong (how to fix it)``.

The one source of truth for ReFrame is :func:`reframe_site_configuration`, which
``site_configs/reframe_config.py`` exposes as ReFrame's ``site_configuration``.

The package: ``catalogue`` (the checks and the figures a target may name), ``model`` (the
dataclasses), ``schema`` (checking a file), ``loading`` (finding and reading sites) and
``reframe_config`` (ReFrame's configuration). Import from ``topobind.validation.sites``.
"""

from topobind.validation.sites.catalogue import CHECKS, CheckSpec, MetricSpec
from topobind.validation.sites.loading import (
    detect_site,
    load_site,
    load_site_file,
    load_sites,
    reframe_results_dir,
    site_names,
    sites_dir,
    valid_sites,
)
from topobind.validation.sites.model import (
    BUILTIN_ENVIRONMENT,
    Calibration,
    Environment,
    ExpectedNode,
    Hugepages,
    Partition,
    Provenance,
    Site,
    Target,
    node_counts,
    tolerance_text,
)
from topobind.validation.sites.paths import (
    HUGEPAGES_1G_NR,
    REFERENCES_SCHEMA_ID,
    REPO,
    SITE_SCHEMA_ID,
)
from topobind.validation.sites.reframe_config import reframe_references, reframe_site_configuration
from topobind.validation.sites.schema import SiteError, schema_problems, site_schema

__all__ = [
    "BUILTIN_ENVIRONMENT",
    "CHECKS",
    "HUGEPAGES_1G_NR",
    "REFERENCES_SCHEMA_ID",
    "REPO",
    "SITE_SCHEMA_ID",
    "Calibration",
    "CheckSpec",
    "Environment",
    "ExpectedNode",
    "Hugepages",
    "MetricSpec",
    "Partition",
    "Provenance",
    "Site",
    "SiteError",
    "Target",
    "detect_site",
    "load_site",
    "load_site_file",
    "load_sites",
    "node_counts",
    "reframe_references",
    "reframe_results_dir",
    "reframe_site_configuration",
    "schema_problems",
    "site_names",
    "site_schema",
    "sites_dir",
    "tolerance_text",
    "valid_sites",
]
