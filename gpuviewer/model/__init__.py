"""Columnar event store and the small models the views draw. Never imports Qt."""
