"""The benchmark scripts of a source checkout (``benchmarks/*.py``, no package) as modules, for scripts and tests."""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType

#: ``benchmarks/`` of the source tree this package sits in (absent from an installed wheel)
BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "benchmarks")


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as the module ``name``: loaded once by path and registered in ``sys.modules`` (its
    dataclasses resolve their module by name); FileNotFoundError outside a source checkout."""
    if name in sys.modules:
        return sys.modules[name]
    path = os.path.join(BENCHMARKS, f"{name}.py")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no benchmark script {path} (benchmarks/ exists only in a source checkout)")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
