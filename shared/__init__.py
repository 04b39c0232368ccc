"""Code shared by every side of zeroforge. Importing it connects to nothing."""
