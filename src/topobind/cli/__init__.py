"""The topobind command: one argparse parser, one module per group of commands."""
