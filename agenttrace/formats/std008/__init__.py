"""STD-008 multi-agent session documents (docs/std008.md): the schema, its rules and the reader."""
