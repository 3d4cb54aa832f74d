"""Pictures of a plan: the box tree and text grid, PNG drawings, GPU/NIC badges."""
