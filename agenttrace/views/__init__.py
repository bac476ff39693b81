"""Read-only projections of a saved session: the viewer, stats, the text tree and the exports."""
