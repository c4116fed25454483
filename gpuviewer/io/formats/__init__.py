"""One module per file format, each listing its readers in READERS (io/reader.py says what a
reader is). io/registry.py imports every module here, so a new format is one new file."""
