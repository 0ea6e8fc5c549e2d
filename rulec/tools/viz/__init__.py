"""The explorer: one self-contained HTML page over one trace (`rulec viz`)."""
