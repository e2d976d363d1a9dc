"""The private Triton API that `intent.runtime.triton_adapter` relies on: these fail loudly when a Triton
release changes it (update the adapter, the one module that uses it)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

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
