"""The shape every generated module must have before it is executed: a last line of defence.

Generated modules are imported (Triton's JIT needs a real module), so text from a kernel that slipped
through unescaped -- a name, a source location with a newline in a comment -- would run as code. The
emitter prevents that (`emit_triton.names`); `check_generated` refuses anything that does not look
like what the emitter writes, whatever produced it:

* the module holds `import triton`, `import triton.language as tl` and `@triton.jit` functions only;
* function bodies hold no imports, `global`/`nonlocal`, classes, nested functions, lambdas, `with`,
  `try`, `raise`, `del`, `yield` or `await`;
* no dunder and none of the builtins that reach outside (`eval`, `exec`, `open`, `getattr`, ...) is
  read unless it is a parameter or local of that name, no attribute starts with `_`, and string
  constants are short plain words (`"nan"`) or one of the exact `INLINE_ASM` strings.
"""

from __future__ import annotations

import ast
import re

from ..errors import IntentError

# Builtins that reach outside the kernel; generated code never reads them (a parameter or local of that
# name is harmless: it shadows the builtin).
FORBIDDEN_NAMES = frozenset({
    "eval", "exec", "compile", "open", "input", "breakpoint", "help", "exit", "quit", "globals", "locals", "vars",
    "getattr", "setattr", "delattr", "memoryview", "print", "__import__", "__builtins__", "__loader__", "__spec__"})
FORBIDDEN_NODES = (ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.ClassDef, ast.FunctionDef,
                   ast.AsyncFunctionDef, ast.Lambda, ast.With, ast.AsyncWith, ast.Try, ast.Raise, ast.Delete,
                   ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)
ALLOWED_IMPORTS = {("triton", None), ("triton.language", "tl")}
# The inline assembly the emitter writes, exactly (emit_triton/emit_lookback.py: a GPU-scope acquire load of a
# flag, which Triton has no load for); no other assembly passes.
INLINE_ASM = frozenset({"ld.acquire.gpu.global.b32 $0, [$1];", "=r,l"})
_SAFE_STRING = re.compile(r"[A-Za-z0-9_.+\-]{0,32}\Z")


class UnsafeModule(IntentError):
    """A generated module does not have the shape of generated code; it is never executed."""


def check_generated(source: str, kernel: str) -> None:
    """Raise `UnsafeModule` unless `source` has the shape described in the module docstring."""
    try:
        tree = ast.parse(source)
        compile(tree, f"<kernel {kernel}>", "exec", dont_inherit=True)  # compiling runs nothing
    except SyntaxError as exc:
        raise UnsafeModule(f"internal error: the generated module for kernel {kernel} does not compile "
                           f"(line {exc.lineno}: {exc.msg}); it is not executed") from None
    module_names = {"triton", "tl"} | {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    for node in tree.body:
        if isinstance(node, ast.Import) and all((a.name, a.asname) in ALLOWED_IMPORTS for a in node.names):
            continue
        if isinstance(node, ast.FunctionDef) and _is_jit(node):
            _check_function(node, kernel, module_names)
            continue
        _refuse(kernel, node, f"a top-level {type(node).__name__} statement")


def _is_jit(fn: ast.FunctionDef) -> bool:
    if len(fn.decorator_list) != 1:
        return False
    d = fn.decorator_list[0]
    return isinstance(d, ast.Attribute) and d.attr == "jit" and isinstance(d.value, ast.Name) and \
        d.value.id == "triton"


def _check_function(fn: ast.FunctionDef, kernel: str, module_names: set[str]) -> None:
    if fn.args.vararg or fn.args.kwarg or fn.args.defaults or fn.args.kw_defaults:
        _refuse(kernel, fn, "a function with *args, **kwargs or defaults")
    local = {a.arg for a in fn.args.args + fn.args.kwonlyargs} | module_names
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            local.add(node.id)
    for stmt in fn.body:
        for node in ast.walk(stmt):
            if isinstance(node, FORBIDDEN_NODES):
                _refuse(kernel, node, f"a {type(node).__name__} inside function {fn.name}")
            if isinstance(node, ast.Name) and node.id not in local and \
                    (node.id in FORBIDDEN_NAMES or node.id.startswith("__")):
                _refuse(kernel, node, f"a use of the builtin {node.id}")
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                _refuse(kernel, node, f"the attribute .{node.attr}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str | bytes) and \
                    not (isinstance(node.value, str) and (_SAFE_STRING.match(node.value) or node.value in INLINE_ASM)):
                _refuse(kernel, node, f"the string constant {node.value!r}")


def _refuse(kernel: str, node: ast.AST, what: str) -> None:
    line = getattr(node, "lineno", "?")
    raise UnsafeModule(f"internal error: the generated module for kernel {kernel} contains {what} (line {line}), "
                       f"which generated code never does; it is not executed")


__all__ = ["UnsafeModule", "check_generated", "FORBIDDEN_NAMES"]
