"""The fuzz suite (issue 10): hostile session files and streams through every reader, view,
export and command. ``make fuzz`` runs it alone; the README says what it covers."""
