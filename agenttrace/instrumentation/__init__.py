"""One subpackage per instrumented library."""
