"""``zeroforge top``: a live terminal view of a running job, like ``htop`` for the run.

``view`` (pure: status + history -> a rich renderable), ``keys`` (the terminal in cbreak
mode, restored on exit) and ``app`` (the polling loop over the run server's
``RunClient``).
"""
