"""Replay window, losses, the Learner and its checkpoints (usable without Ray)."""
