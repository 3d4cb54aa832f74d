"""topobind: topology-aware job launch and binding for HPC nodes.

Data flows one way: topology -> plan -> emitters/launchers -> kernels -> results -> stats/reports.
"""

__version__ = "0.1.0"
