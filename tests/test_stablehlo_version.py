"""The pinned StableHLO version: one place, recorded in the text and the artifact, inside jaxlib's window;
and the exit without jax (text still emitted, execution says what to install)."""

from __future__ import annotations

import builtins
import re

import numpy as np
import pytest

import oracle.stablehlo as shlo
from kir.errors import IntentError
from oracle.stablehlo import runtime, version
from tests import samples
from tests import stablehlo_kernels as K

ARGS = {"x": np.zeros(4, np.float32), "y": np.ones(4, np.float32)}


def test_pin_is_recorded_in_the_text() -> None:
    text = shlo.emit(samples.vector_add(), ARGS)
    assert re.fullmatch(r"\d+\.\d+\.\d+", shlo.TARGET_VERSION)
    assert f"// Target StableHLO version {shlo.TARGET_VERSION};" in text
    assert f'module @add attributes {{intent.stablehlo_target = "{shlo.TARGET_VERSION}"}}' in text


def test_version_window_arithmetic() -> None:
    assert version.within("1.0.0", "0.9.0", "1.17.0")
    assert version.within("1.17.0", "0.9.0", "1.17.0")
    assert not version.within("1.18.0", "0.9.0", "1.17.0")
    assert not version.within("0.8.9", "0.9.0", "1.17.0")
    assert version.parse_version("1.10.2") > version.parse_version("1.9.7")
    with pytest.raises(ValueError, match="malformed StableHLO version '1.x'"):
        version.parse_version("1.x")


def test_pin_lies_within_jaxlibs_supported_range() -> None:
    pytest.importorskip("jax")
    lo, hi = runtime.supported_range()
    assert version.within(shlo.TARGET_VERSION, lo, hi), (shlo.TARGET_VERSION, lo, hi)


def test_pin_is_recorded_in_the_portable_artifact() -> None:
    pytest.importorskip("jax")
    art = shlo.artifact(samples.vector_add(), ARGS)
    assert art.startswith(b"ML\xefR")  # MLIR bytecode
    assert f"StableHLO_v{shlo.TARGET_VERSION}".encode() in art


def test_every_test_kernel_parses_verifies_and_serialises() -> None:
    pytest.importorskip("jax")
    cases = [
        (samples.softmax(), {"x": np.zeros((2, 3), np.float32)}),
        (samples.segment_sum(), {"values": np.zeros(4, np.float32), "offsets": np.array([0, 1, 4])}),
        (samples.recurrence(), {"a": np.zeros((2, 3), np.float32), "x": np.zeros((2, 3), np.float32)}),
        (samples.histogram(), {"x": np.zeros(3, np.int32), "counts": np.zeros(2, np.int32)}),
        (K.welford(), {"x": np.zeros((2, 5), np.float32)}),
        (K.collatz(), {"x": np.ones(3, np.int64)}),
        (K.custom_scan(True, True), {"a": np.ones(4), "b": np.ones(4)}),
        (K.segment_cumsum(True, False), {"values": np.zeros(4, np.int32), "offsets": np.array([0, 4]),
                                         "out": np.zeros(4, np.int32)}),
        (K.dropout(), {"x": np.zeros(4, np.float32), "p": 0.5, "seed": 3}),
    ]
    for kernel, args in cases:
        art = runtime.serialize(shlo.emit(kernel, args))
        assert f"StableHLO_v{shlo.TARGET_VERSION}".encode() in art


def test_a_pin_outside_the_window_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("jax")
    monkeypatch.setattr(runtime, "TARGET_VERSION", "99.0.0")
    with pytest.raises(IntentError, match=r"^the pinned StableHLO version 99\.0\.0 is outside the installed jaxlib's "
                                          r"supported range \["):
        runtime.check_pin()


def test_without_jax_text_is_emitted_and_running_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_jax(name: str, *args, **kwargs):
        if name == "jax" or name.startswith(("jax.", "jaxlib")):
            raise ImportError(f"No module named '{name}'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_jax)
    text = shlo.emit(samples.vector_add(), ARGS)
    assert "stablehlo.add %x, %y" in text
    with pytest.raises(IntentError, match=r"install the stablehlo extra: pip install -e '\.\[stablehlo\]'$"):
        shlo.run(samples.vector_add(), ARGS)
    with pytest.raises(IntentError, match=r"^the StableHLO runtime needs jax and jaxlib \(No module named 'jax'\)"):
        shlo.artifact(samples.vector_add(), ARGS)
