"""Fixtures shared by ``test/`` and ``benchmarks/``: toy and Go1 estimation problems, synthetic windows, the paper's
systems, simulated datasets and table helpers (imported by no other layer)."""
