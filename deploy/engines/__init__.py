"""Engine protocols: zeroforge as a GTP (Go) or Gomocup (gomoku) engine, and matches
between engines and players."""
