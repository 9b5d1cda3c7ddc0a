"""Applications on top of the I/O layer: the bag replay (``mcoe_replay``), accuracy metrics and the PNG report."""
