"""Constants of the site files: schema identifiers, the repository, the 1 GiB pool."""

from __future__ import annotations

from topobind.paths import data_root

SITE_SCHEMA_ID = "topobind.site/1"
REFERENCES_SCHEMA_ID = "topobind.references/1"
REPO = data_root()  # the checkout, or the installed package (its site_configs/, reframe_tests/)
HUGEPAGES_1G_NR = "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"
