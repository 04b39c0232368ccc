"""The command line, the run driver and deployment files."""
