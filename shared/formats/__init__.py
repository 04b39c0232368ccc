"""File and wire formats: SGF game records (``sgf``) and network weights (``weights``).

Nothing here depends on the networks or the transport; both depend on this package.
"""
