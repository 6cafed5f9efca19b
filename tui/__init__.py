"""headseg.tui — a Textual app to inspect head matrices and segment boundaries."""
