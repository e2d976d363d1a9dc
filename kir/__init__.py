"""KIR: the frozen kernel IR, its types, typing rules, verifier and text format."""

from . import text  # noqa: F401  (the text format)
from .access import Gather, Load, Scatter, Store
from .atomic import Atomic, AtomicCAS, AtomicKind, MemOrder
from .buffers import Alloc, InitMode
from .builder import Builder, build_kernel
from .contract import Dot, Precision
from .control import INDEX_DTYPE, For, If, Parallel, While, Yield
from .core import (
    OP_CLASSES,
    DynSlice,
    Kernel,
    Op,
    Param,
    ParamKind,
    RefType,
    Region,
    Role,
    Slice,
    TensorType,
    TypeContext,
    Value,
    load_families,
    scalar,
)
from .dims import DBin, DConst, Dim, DSym, PAnd, PCmp, PNot, POr, Pred, as_dim, dim_bin
from .dtypes import DType, DTypeVar
from .errors import DiagnosticError, IntentError, LaunchError, Loc, NotExpressible, VerifyError
from .histogram import Histogram
from .layout import Broadcast, Concat, ExpandDims, Reshape, SliceOp, Squeeze, Transpose
from .pointwise import (
    Binary,
    BinaryFn,
    Bitcast,
    Cast,
    CmpFn,
    Compare,
    Constant,
    DimValue,
    Iota,
    Select,
    Unary,
    UnaryFn,
)
from .reduce import Reduce, ReduceKind
from .region import RegionFold, RegionScan
from .rng import Random, RngKind
from .scan import Scan, ScanKind
from .solver import ShapeSolver
from .sort import Sort
from .verify import verify

load_families(__name__)  # every family's op classes, whether or not a name above comes from it

__all__ = [name for name in dir() if not name.startswith("_")]
