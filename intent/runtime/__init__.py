"""The compiler-free runtime: prebuilt kernels (`load`), the launch profiler (`profile`), and what both
share with the compiler's launcher (the Triton adapter, the index-width choice, the expression format).

Nothing here imports the compiler (the frontend, Z3, networkx, the physical planner); torch and
triton are imported when a kernel is loaded or launched, not when this package is imported.
"""

from .artifacts import load
from .profiling import profile

__all__ = ["load", "profile"]
