"""The distributed runtime on Ray: the only package of zeroforge that imports ``ray``.

It hosts the plain service classes of ``zeroforge.actors`` and ``zeroforge.learner`` in
Ray actors, runs the controller actor that owns a run (placing, restarting and scaling
its actors), hands the driver a run handle, and joins clusters with the run's token.

- ``kinds``: the per-kind table (``KINDS``); ``naming``: the actors' Ray names.
- ``hosts``: the actors (``ServiceHost``, ``InferenceServerActor``, ``RemoteEvaluator``).
- ``controller``: the ``Controller``, with ``slots``, ``resources``, ``run_metrics`` and
  ``failures`` as its helpers.
- ``handle``: ``RunHandle``, ``start_run``, ``find_run``; ``cluster``: ``init_local``,
  ``join``, the token.
- ``private_api``: every private Ray API used, one function each.
"""
