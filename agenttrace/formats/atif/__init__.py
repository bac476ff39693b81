"""ATIF trajectories (docs/atif.md): the reader."""
