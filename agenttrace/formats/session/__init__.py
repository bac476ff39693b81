"""agenttrace's own files: the gzipped session file and the event stream (with the spool,
leftovers, unfinished writes, damaged files, rebuilt runs, the opTree readers, requests and
the lease), their schema and the published JSON Schema (docs/session-file.md, docs/events.md)."""
