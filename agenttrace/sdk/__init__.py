"""What needs the OpenTelemetry SDK: our span processor, ``init``/``shutdown``/``force_flush``,
and the sinks that write the event stream, the session file, the ledger and console lines."""
