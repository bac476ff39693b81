"""The Claude Agent SDK's exchange log (README, "The exchange log"): its lines, files, the
messages it holds and the writer."""
