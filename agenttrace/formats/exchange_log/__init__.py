"""The Claude Agent SDK's exchange log (docs/how-to/exports.md, "The exchange log"): its lines,
files, the
messages it holds, the writer (live, from the SDK's messages) and the export (from a saved
session)."""
