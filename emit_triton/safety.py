"""The shape every generated module must have before it is executed: defined in `intent.runtime.safety`,
which prebuilt kernels (`intent.load`) also check their stored sources with."""

from intent.runtime.safety import FORBIDDEN_NAMES, FORBIDDEN_NODES, UnsafeModule, check_generated

__all__ = ["FORBIDDEN_NAMES", "FORBIDDEN_NODES", "UnsafeModule", "check_generated"]
