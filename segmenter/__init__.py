"""headseg.segmenter — segment boundaries from the selected heads (API and CLI)."""
