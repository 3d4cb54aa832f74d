"""Site checks: site files, ReFrame configuration and runs, calibration."""
