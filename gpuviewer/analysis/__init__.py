"""Metrics and findings computed from a Trace. Pure functions; never imports Qt."""
