"""Self-play workers, inference servers and the evaluator: plain classes, Ray wiring apart."""
