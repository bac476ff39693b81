"""The domain model, with no OpenTelemetry in it: canonical events and ``LoggedString``, ids,
path labels, the session registry, and the event-stream and session-file formats (validated
against the structs of ``schema``, the source of the published JSON Schema)."""
