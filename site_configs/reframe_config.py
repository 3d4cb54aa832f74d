"""ReFrame configuration of topobind, derived from every site_configs/<site>/site.yaml.

  reframe -C site_configs/reframe_config.py -c reframe_tests --system local:default -t quick -r

One source of truth: systems, partitions, environments and references all come from the
site files (topobind.checks.sites); this file only hands the result to ReFrame. Results (reports,
perflogs, the results database for --performance-compare, stage and output directories) go
to $TOPOBIND_REFRAME_RESULTS (default: results/reframe/ of the repository). The site files
are read from $TOPOBIND_SITES_DIR (default: site_configs/).
"""

import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
try:
    import topobind.checks.sites  # noqa: F401
except ImportError:  # running from a checkout without 'pip install -e .'
    sys.path.insert(0, os.path.join(_REPO, "src"))

from topobind.checks.sites import reframe_results_dir, reframe_site_configuration  # noqa: E402

os.makedirs(os.path.join(reframe_results_dir(), "logs"), exist_ok=True)
site_configuration = reframe_site_configuration()
