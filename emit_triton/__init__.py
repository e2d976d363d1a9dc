"""Triton emission and launch: generated source, launcher, index-width choice, compile cache, AOT PTX."""

from .abi import AbiArg, ArgKind, ConstexprArg, EmittedKernel
from .emit import EMIT, emit
from .index_width import IndexWidth
from .launcher import cubin, index_width_for, launch, ptx, source
