"""The OpenTelemetry-free consumers of lifecycle records: the opTree builder, the event-stream and
session-file store, the ledger writer, the console, the background worker and the outage buffer."""
