"""The distributed runtime on Ray: the only package of zeroforge that imports ``ray``.

It hosts the plain service classes of ``zeroforge.actors`` and ``zeroforge.learner`` in
Ray actors, runs the controller actor that owns a run (placing, restarting and scaling
its actors), hands the driver a run handle, and joins clusters with the run's token.
"""
