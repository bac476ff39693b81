"""One folder per format on disk, each with its schema, reader and writer together: agenttrace's
own session file and event stream (``session``), the billing ledger, STD-008 multi-agent session
documents, ATIF trajectories and the Claude Agent SDK's exchange log; shared bounded I/O once."""
