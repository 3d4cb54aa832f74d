"""Plans: the layout registry and its planners, the GPU layout, the Plan record and its JSON."""
