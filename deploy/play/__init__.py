"""Playing a game with people: ``zeroforge play`` in the terminal (``terminal``) and in the
browser (``web``: a small HTTP server, ``board.html`` and ``board.js``). Both use
``games.session.GameSession`` for the rules and history, ``players.factory`` for the
computer's moves and hints, and ``shared.formats.sgf`` for records."""
