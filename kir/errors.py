"""The error hierarchy, defined in `intent.errors` (which the compiler-free runtime imports without KIR)."""

from intent.errors import (
    DiagnosticError,
    IntentError,
    LaunchError,
    Loc,
    NotExpressible,
    VerifyError,
    register_source,
)

__all__ = ["DiagnosticError", "IntentError", "LaunchError", "Loc", "NotExpressible", "VerifyError",
           "register_source"]
