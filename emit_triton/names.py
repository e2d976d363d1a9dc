"""The only way text from kernels (names in `.kir` files and Python sources, source locations) reaches
generated Triton source.

`mangle(name, kind)` turns any string into a safe Python identifier: plain ASCII, prefixed by its kind
(`p_x` for a parameter named `x`, `v_row` for a value named `row`), so that it is never a keyword, a
builtin, a dunder, a non-ASCII identifier that Python would NFKC-fold onto another name (`ｐid` ->
`pid`), nor one of the emitter's own names (which never start with a kind prefix; see
`is_user_name`). Names that are not plain identifiers keep a readable ASCII part and gain a hash of
the original, so distinct names stay distinct.

`comment_text(text)` makes any text safe inside a `#` comment of generated code: one line of
printable ASCII, everything else escaped (a newline in a file name cannot end the comment).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

# Kind prefixes of user names in generated code. The emitter's own names never start with these.
KINDS = {"param": "p", "value": "v", "symbol": "s", "kernel": "k", "workspace": "w", "scalar": "a"}
_PREFIXES = tuple(f"{p}_" for p in KINDS.values())
_PLAIN = re.compile(r"[A-Za-z0-9_]+\Z")
_NOT_PLAIN = re.compile(r"[^A-Za-z0-9_]+")
MAX_PLAIN = 48  # longer names are shortened (and hashed) to keep generated lines readable


def mangle(name: str, kind: str = "value") -> str:
    """A safe identifier for the user name `name` of the given kind (see `KINDS`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown name kind {kind!r} (expected one of {', '.join(KINDS)})")
    if not isinstance(name, str):
        raise TypeError(f"a name must be a string, got {type(name).__name__}")
    prefix = KINDS[kind]
    if _PLAIN.match(name) and len(name) <= MAX_PLAIN:
        return f"{prefix}_{name}"
    readable = _NOT_PLAIN.sub("_", unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii"))
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{prefix}_{readable.strip('_')[:24]}_x{digest}"


def is_user_name(identifier: str) -> bool:
    """Whether `identifier` is in the user namespace of generated code (what `mangle` returns)."""
    return identifier.startswith(_PREFIXES)


def comment_text(text: str, limit: int = 120) -> str:
    """`text` as one line of printable ASCII for a `#` comment (control and non-ASCII characters escaped)."""
    if not isinstance(text, str):
        text = str(text)
    out = []
    for ch in text:
        if " " <= ch <= "~":
            out.append(ch)
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    line = "".join(out)
    return line if len(line) <= limit else line[: limit - 3] + "..."


__all__ = ["KINDS", "mangle", "is_user_name", "comment_text"]
