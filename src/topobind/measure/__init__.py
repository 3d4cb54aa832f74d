"""The C kernels' Python side: finding and running them, their result documents, hugepage pools,
statistics."""
