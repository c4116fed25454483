"""Trace readers (one module per format), sniffing, cache. Never imports Qt."""
