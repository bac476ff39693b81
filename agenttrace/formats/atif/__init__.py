"""ATIF trajectories (docs/atif.md): the reader and the writer."""
