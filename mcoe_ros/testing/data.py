"""Locations of the data shipped with the package (the sample bag), for tests, benchmarks and the README job."""

from __future__ import annotations

import os

#: the committed 10 s simulator bag (6 s squat-sway then 4 s trot, 7.2 kg payload; see its metadata.yaml)
SAMPLE_BAG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "go1_sample")
