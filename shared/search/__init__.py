"""Batched tree search over the Game seam; no torch here."""
