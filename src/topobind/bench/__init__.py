"""Repeated kernel runs (topobind bench) and HPL, through the launch path."""
