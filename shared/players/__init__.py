"""Players: anything that picks moves, and matches between them.

``factory`` builds a player from a spec string (``human``, ``random``, ``uct:N``,
``net:PATH[:SIMS]``, ``gtp:COMMAND`` ...) and holds the built-in ones; ``gtp`` drives an
outside engine over the Go Text Protocol as a player; ``arena`` plays matches between two
players and scores them; ``ladder`` rates many players on one Elo scale from their
results. Self-play does not go through players: it runs batched search directly.
"""
