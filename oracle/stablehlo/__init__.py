"""The StableHLO side exit: KIR kernels whose meaning is a pure tensor function, as version-pinned modules.

`emit(kernel, args)` returns the module text for the specialisation `args` select (shape symbols
bound from the arguments' shapes); `run(kernel, args)` parses, verifies, serialises a portable
artifact for the pinned version (`TARGET_VERSION`) and executes it with jaxlib's XLA CPU client,
returning `{output: ndarray}` for the `Out` and `InOut` parameters, like `oracle.run`. Kernels with
no exact StableHLO equivalent raise `kir.errors.NotExpressible` naming the op and its source line.
jax/jaxlib is optional: without it `emit` works and `run` says what to install.
"""

from .module import Module, build, emit
from .registry import EMITTERS, REFUSALS
from .runtime import artifact, run
from .version import TARGET_ATTRIBUTE, TARGET_VERSION

__all__ = ["EMITTERS", "REFUSALS", "TARGET_ATTRIBUTE", "TARGET_VERSION", "Module", "artifact", "build", "emit",
           "run"]
