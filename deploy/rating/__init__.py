"""Rating what a run trained (the Elo ladder) and its game records."""
