"""The bottom layer: settings, agenttrace's own error reporting, redaction, process-wide state.

Imports nothing else of agenttrace; every other layer may import it.
"""
