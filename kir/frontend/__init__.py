"""The Python frontend: the AST of an `@intent.kernel` body -> KIR. The body is parsed, never executed.

`build(fn, requires=..., checks=..., dtypes=..., consts=...)` returns a verified `kir.Kernel`; every
failure is a `kir.errors.DiagnosticError` located at the author's file, line and column.
"""

from . import (  # noqa: F401  (importing registers each family's spellings)
    atomic,
    buffers,
    contract,
    histogram,
    layout,
    pointwise,
    reduce,
    rng,
    scan,
    sort,
)
from .calls import CALLS
from .kernel import build, signature
from .signature import (
    ConstSpec,
    KernelSignature,
    ParamInfo,
    ParamSpec,
    ScalarSpec,
    TensorSpec,
    const_fits,
    read_signature,
)
from .source import SourceInfo, function_source

__all__ = ["CALLS", "build", "signature", "ConstSpec", "KernelSignature", "ParamInfo", "ParamSpec", "ScalarSpec",
           "TensorSpec", "const_fits", "read_signature", "SourceInfo", "function_source"]
