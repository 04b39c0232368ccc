"""What the two runtimes share: the local one (``deploy/local_run.py``) and the one on Ray
(``deploy/ray/``), which sits below the command line and must not import back up into it.

- ``builder``: the one place that builds the services from a run's config.
- ``status``: ``RunStatus``, a run's status as both runtimes report it.
- ``run_registry``: the per-user index of live runs, by run id.
- ``node_stats``: the process and node resource figures of the metrics.
"""
