"""The private Triton API that `intent.runtime.triton_adapter` relies on: these fail loudly when a Triton
release changes it (update the adapter, the one module that uses it)."""

from __future__ import annotations

import inspect
import json
import os
import re
from pathlib import Path

import pytest
import torch

from intent.runtime import triton_adapter as adapter

SOURCE = '''
import triton
import triton.language as tl


@triton.jit
def k_copy(p_x, p_out, s_N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(p_out + offs, tl.load(p_x + offs, mask=offs < s_N), mask=offs < s_N)
'''


def _function(tmp_path: Path, mode: adapter.Mode, name: str) -> object:
    path = tmp_path / f"{name}.py"
    path.write_text(SOURCE)
    return adapter.import_source(path, SOURCE, name, mode).k_copy


def test_the_private_names_the_adapter_uses_exist() -> None:
    from triton import knobs
    from triton.compiler import CompiledKernel, make_backend  # noqa: F401
    from triton.runtime.interpreter import InterpretedFunction, _patch_lang, interpreter_builder
    from triton.runtime.jit import JITFunction, create_function_from_signature  # noqa: F401

    assert "interpret" in dir(knobs.runtime)
    assert callable(_patch_lang) and hasattr(InterpretedFunction, "rewrite")
    assert hasattr(interpreter_builder, "options") and hasattr(interpreter_builder.options, "sanitize_overflow")
    assert list(inspect.signature(JITFunction._pack_args).parameters) == \
        ["self", "backend", "kwargs", "bound_args", "specialization", "options"]
    assert list(inspect.signature(CompiledKernel.__init__).parameters) == ["self", "src", "metadata_group", "hash"]


def test_the_interpreter_folds_exactly_the_combines_twins_keep() -> None:
    """Interpreted twins keep the library combines the interpreter recognises by identity (and folds with
    NumPy) and call every other combine's Python code through `.fn`."""
    import triton.language as tl
    from triton.runtime import interpreter

    source = inspect.getsource(interpreter)
    assert set(re.findall(r"tl\.standard\.(\w+)", source)) == set(adapter._NATIVE_COMBINES)
    assert all(hasattr(tl.standard, name) for name in adapter._NATIVE_COMBINES)
    assert "combine_fn.fn(" in source


def test_no_triton_function_is_replaced() -> None:
    """Interpreted runs reach Triton's library through per-function twins, never by assigning to Triton's
    classes or modules."""
    text = Path(adapter.__file__).read_text()
    assert not re.search(r"(JITFunction|InterpretedFunction)\.\w+\s*(,[^=\n]*)?=(?!=)", text)
    assert not re.search(r"setattr\((tl|triton|JITFunction|InterpretedFunction)", text)


def test_interpreted_runs_and_the_mode_switch(tmp_path: Path) -> None:
    fn = _function(tmp_path, adapter.Mode.INTERPRETED, "_adapter_interpreted")
    x, out = torch.arange(10.0), torch.zeros(10)
    adapter.run_interpreted(fn, 2, [x, out, 10], {"BLOCK": 8})
    assert torch.equal(out, x)
    assert adapter.library_mode() is adapter.Mode.COMPILED


def test_specialisation_compile_and_a_launchable_kernel_from_stored_files(tmp_path: Path) -> None:
    fn = _function(tmp_path, adapter.Mode.COMPILED, "_adapter_compiled")
    x, out = torch.zeros(64), torch.zeros(64)
    options, signature, constexprs, attrs = adapter.specialisation(fn, 90, [x, out, 64], {"BLOCK": 32})
    assert signature == {"p_x": "*fp32", "p_out": "*fp32", "s_N": "i32", "BLOCK": "constexpr"}
    assert constexprs == {(3,): 32}
    assert attrs[(0,)] == [["tt.divisibility", 16]] and attrs[(2,)] == [["tt.divisibility", 16]]
    ptx, cubin, metadata = adapter.compile_for(fn, 90, signature, constexprs, attrs, options.__dict__)
    assert ".entry k_copy" in ptx and cubin is not None and metadata["name"] == "k_copy"
    (tmp_path / "k.cubin").write_bytes(cubin)
    (tmp_path / "k.json").write_text(json.dumps(metadata))
    kernel = adapter.load_compiled(tmp_path, "k_copy", "k.json", "k.cubin", ["p_x", "p_out", "s_N", "BLOCK"],
                                   signature, constexprs, "key")
    assert kernel.name == "k_copy" and kernel.kernel == cubin and kernel.metadata.num_warps == options.num_warps


LIBRARY_SOURCE = '''
import triton
import triton.language as tl


@triton.jit
def _twice(x):
    return x + x


@triton.jit
def k_rowsum(p_x, p_out, BLOCK: tl.constexpr):
    x = tl.load(p_x + tl.arange(0, BLOCK))
    tl.store(p_out, _twice(tl.sum(x, axis=0)))
    tl.store(p_out + 1, tl.max(tl.cumsum(x, axis=0), axis=0))


@triton.jit
def k_assert(p_x, BLOCK: tl.constexpr):
    x = tl.load(p_x + tl.arange(0, BLOCK))
    tl.device_assert(x < 0, "x must be negative")
'''


def _module(tmp_path: Path, mode: adapter.Mode, name: str) -> object:
    path = tmp_path / f"{name}.py"
    path.write_text(LIBRARY_SOURCE)
    return adapter.import_source(path, LIBRARY_SOURCE, name, mode)


def test_interpreted_runs_call_the_library_and_helpers_then_leave_triton_as_it_was(tmp_path: Path) -> None:
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    calls = (JITFunction.__call__, InterpretedFunction.__call__)
    loads, sums = tl.load, tl.sum
    module = _module(tmp_path, adapter.Mode.INTERPRETED, "_adapter_library")
    x, out = torch.arange(8.0), torch.zeros(2)
    adapter.run_interpreted(module.k_rowsum, 1, [x, out], {"BLOCK": 8})
    assert out.tolist() == [56.0, 28.0]
    # the interpreter's patches and the library's call path are restored after the run
    assert (JITFunction.__call__, InterpretedFunction.__call__) == calls
    assert tl.load is loads and tl.sum is sums and isinstance(tl.sum, JITFunction)
    compiled = _module(tmp_path, adapter.Mode.COMPILED, "_adapter_library_compiled")
    options, signature, constexprs, attrs = adapter.specialisation(compiled.k_rowsum, 90, [x, out], {"BLOCK": 8})
    ptx, _, _ = adapter.compile_for(compiled.k_rowsum, 90, signature, constexprs, attrs, options.__dict__)
    assert ".entry k_rowsum" in ptx  # the library still compiles in this process


def test_device_asserts_fire_only_under_debug_and_the_option_is_restored(tmp_path: Path) -> None:
    from triton.runtime.interpreter import interpreter_builder

    before = interpreter_builder.options
    module = _module(tmp_path, adapter.Mode.INTERPRETED, "_adapter_assert")
    x = torch.ones(4)
    adapter.run_interpreted(module.k_assert, 1, [x], {"BLOCK": 4})  # no debug: not checked
    with pytest.raises(Exception, match="x must be negative"):
        adapter.run_interpreted(module.k_assert, 1, [x], {"BLOCK": 4, "debug": True})
    assert interpreter_builder.options is before


def test_the_interpreter_switch_is_scoped(monkeypatch) -> None:
    from triton import knobs

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert not adapter.user_wants_interpreter()
    with adapter.triton_interpret(True):
        assert knobs.runtime.interpret and adapter.user_wants_interpreter()
        with adapter.triton_interpret(False):
            assert not knobs.runtime.interpret
        assert knobs.runtime.interpret
    assert not knobs.runtime.interpret and "TRITON_INTERPRET" not in os.environ


def test_the_measurement_hooks_name_what_the_interpreter_has_and_restore_it(tmp_path: Path) -> None:
    """bench/traffic.py and bench/fast_reduce.py reach Triton's interpreter only through these."""
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    names = ("set_grid_dim", "set_grid_idx", "create_masked_load", "create_masked_store", "create_atomic_rmw",
             "create_atomic_cas")
    assert all(callable(getattr(builder, name)) for name in names)
    assert list(inspect.signature(interpreter.ReduceOps.generic_reduce).parameters) == ["self", "input"]
    assert {"axis", "keep_dims", "combine_fn"} <= set(vars(interpreter.ReduceOps(0, lambda a, b: a, True)))
    assert callable(interpreter.ReduceOps.unravel) and callable(interpreter.ReduceOps.to_tensor)
    before = dict(builder.__dict__)
    seen: list[str] = []
    with adapter.interpreter_builder_hooks(names, lambda name, original: (seen.append(name), original)[1]):
        assert all(name in builder.__dict__ for name in names)
    assert builder.__dict__ == before and seen == list(names)
    original = interpreter.ReduceOps.generic_reduce
    with adapter.interpreter_custom_reduce(lambda ops, inputs: None):
        assert interpreter.ReduceOps.generic_reduce is not original
    assert interpreter.ReduceOps.generic_reduce is original
    assert adapter.is_interpreted(_function(tmp_path, adapter.Mode.INTERPRETED, "_adapter_hooks"))
    assert adapter.ptxas_path(90).name.startswith("ptxas")
