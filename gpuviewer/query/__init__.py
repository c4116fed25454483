"""Queries over a session: DataFrames (tables), SQL through DuckDB (sql) and summaries like
`nsys stats` (stats). Qt-free; the window's SQL and Statistics tabs run these off its UI thread."""
