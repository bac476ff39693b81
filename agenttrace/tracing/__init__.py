"""User code to scopes to spans, on the OpenTelemetry API only: scopes, decorators, the
responsibility model (transcripts), reading GenAI responses, logs, carrying context to threads."""
