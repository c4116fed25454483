"""The main window and its panels: thin views over the model; they never parse files."""
