"""Policy-value networks and the evaluators that run them.

``model`` builds a torch network from a ``NetConfig`` and a game's spec (the residual
towers, their heads, weight blobs to and from state dicts); ``torch_evaluator`` runs one
as a search ``Evaluator`` (batched, on the CPU or a GPU, in the configured precision);
``backends`` runs the same weights through ONNX Runtime, OpenVINO or torch-int8 instead.
Rules and search never import this package: they see nets only through the ``Evaluator``
seam (``zeroforge.shared.search.evaluator``).
"""
