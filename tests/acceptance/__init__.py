"""The project's acceptance-style kernels: one module per construct, each with a `cases()` generator.

Each case is `(kernel, args, expected)`: `args` maps every parameter to a CPU tensor or a Python scalar
(outputs pre-allocated) and `expected` maps output names to the tensors they must hold afterwards. A
module may set `TOL` for float comparisons. `tests/test_acceptance_cases.py` runs every case through
the launcher and the oracle; the unit tests read the kernels' KIR and physical programs.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
FILES = sorted(p for p in HERE.glob("*.py") if not p.name.startswith("_"))


def path_of(stem: str) -> Path:
    return HERE / f"{stem}.py"


def load(path: Path) -> ModuleType:
    """Import one kernel module by path (it is not imported as part of the tests package)."""
    spec = importlib.util.spec_from_file_location(f"acceptance_{path.stem}", path)
    assert spec is not None and spec.loader is not None, f"cannot load {path}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
