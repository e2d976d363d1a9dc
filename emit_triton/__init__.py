"""Triton emission and launch: generated source, launcher, index-width choice, compile cache, AOT PTX."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kir.lazy import make_lazy

if TYPE_CHECKING:
    from .abi import AbiArg, ArgKind, ConstexprArg, EmittedKernel
    from .emit import EMIT, emit
    from .index_width import IndexWidth
    from .launcher import cubin, index_width_for, launch, ptx, source
    from .sanitize import SanitizerError, sanitizing

# Loaded on first use: a launch whose emitted kernel is in the disk cache never imports the emitter
# (nor, through it, the physical program's construction and passes).
make_lazy(__name__, {
    "AbiArg": (".abi", "AbiArg"), "ArgKind": (".abi", "ArgKind"), "ConstexprArg": (".abi", "ConstexprArg"),
    "EmittedKernel": (".abi", "EmittedKernel"), "IndexWidth": (".index_width", "IndexWidth"),
    "cubin": (".launcher", "cubin"), "index_width_for": (".launcher", "index_width_for"),
    "launch": (".launcher", "launch"), "ptx": (".launcher", "ptx"), "source": (".launcher", "source"),
    "EMIT": (".emit", "EMIT"), "emit": (".emit", "emit"),
    "SanitizerError": (".sanitize", "SanitizerError"), "sanitizing": (".sanitize", "sanitizing")})

__all__ = ["AbiArg", "ArgKind", "ConstexprArg", "EmittedKernel", "EMIT", "emit", "IndexWidth", "cubin",
           "index_width_for", "launch", "ptx", "source", "SanitizerError", "sanitizing"]
