"""Constants of the site files: schema identifiers, the repository, the 1 GiB pool."""

from __future__ import annotations

from pathlib import Path

SITE_SCHEMA_ID = "topobind.site/1"
REFERENCES_SCHEMA_ID = "topobind.references/1"
REPO = Path(__file__).resolve().parents[4]
HUGEPAGES_1G_NR = "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"
