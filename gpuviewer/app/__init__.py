"""Entry points: command line, GUI start-up."""
