"""The one place that pins the StableHLO version this exit targets.

Modules are serialised as portable artifacts for `TARGET_VERSION`; the artifact's header names it
(`StableHLO_v<version>`), and the emitted text records it as the module attribute
`intent.stablehlo_target` and in its header comment. StableHLO 1.0.0 is the first release with the
5-year backward-compatibility guarantee, so any consumer built since then reads these artifacts.
"""

from __future__ import annotations

TARGET_VERSION = "1.0.0"
TARGET_ATTRIBUTE = "intent.stablehlo_target"


def parse_version(text: str) -> tuple[int, int, int]:
    parts = text.strip().split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"malformed StableHLO version {text!r}; expected MAJOR.MINOR.PATCH")
    major, minor, patch = (int(p) for p in parts)
    return major, minor, patch


def within(version: str, minimum: str, current: str) -> bool:
    """Whether `version` lies in the consumer's supported window [minimum, current]."""
    return parse_version(minimum) <= parse_version(version) <= parse_version(current)
