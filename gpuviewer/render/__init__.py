"""pyqtgraph items that draw what model/ returns: timeline, axis, overlays."""
