"""STD-008 multi-agent session documents (docs/std008.md): the schema, its rules, the reader
and the writer."""
