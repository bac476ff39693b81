"""The domain, with no file formats and no OpenTelemetry in it: canonical events and
``LoggedString``, lifecycle records, ids, path labels, transcript resets, substance links and
the step journal's lines."""
