"""Launch-argument checks shared by the compiler's launcher (`emit_triton.arguments`) and prebuilt
kernels (`intent.runtime.artifacts`): one implementation of each, over plain names, roles and tensors."""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ..errors import LaunchError

T = TypeVar("T")

# The values of each integer dtype and the largest finite value of each float dtype, by dtype name (the
# compiler's kir.dtypes agree: tests/test_scalar_checks.py)
INT_RANGES = {f"{s}{b}": ((-(1 << (b - 1)), (1 << (b - 1)) - 1) if s == "i" else (0, (1 << b) - 1))
              for s in "iu" for b in (8, 16, 32, 64)} | {"i4": (-8, 7)}
FLOAT_MAX = {"f16": 65504.0, "bf16": 3.3895313892515355e38, "f32": 3.4028234663852886e38,
             "f64": 1.7976931348623157e308, "f8e4m3": 448.0, "f8e5m2": 57344.0}


def type_name(value: Any) -> str:
    """How an error names the type of a value it refuses."""
    if value is None:
        return "None"
    t = type(value)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def check_tensor(name: str, text: str, dtype: str, rank: int, value: Any, dtype_of: Callable[[Any], str | None]
                 ) -> Any:
    """`value` as tensor parameter `name` (`text`: its type as written, of dtype name `dtype` and rank `rank`):
    a dense torch tensor of that dtype and rank (i4: packed two per byte in int8 or uint8 bytes), else a
    `LaunchError` naming the parameter. `dtype_of(tensor)` is the Intent dtype name of a tensor."""
    import torch

    if not isinstance(value, torch.Tensor):
        raise LaunchError(f"parameter {name}: expected a tensor ({text}), got {type_name(value)}")
    if value.layout != torch.strided:
        raise LaunchError(f"parameter {name}: expected a dense (strided) tensor ({text}), got a tensor with layout "
                          f"{value.layout}")
    if dtype == "i4":
        if dtype_of(value) not in ("i8", "u8") or value.dim() != rank or rank == 0:
            raise LaunchError(f"parameter {name}: expected i4 values packed two per byte in an int8 or uint8 "
                              f"tensor of rank {rank} (the last axis holds N // 2 bytes), got a tensor of "
                              f"{value.dtype} and shape {tuple(value.shape)}")
        return value
    if dtype_of(value) != dtype:
        raise LaunchError(f"parameter {name}: expected {dtype}, got {value.dtype}")
    if value.dim() != rank:
        raise LaunchError(f"parameter {name}: expected rank {rank} ({text}), got a tensor of shape "
                          f"{tuple(value.shape)}")
    return value


SUPPORTED_DEVICES = ("cpu", "cuda")


def common_device(tensors: Mapping[str, Any]) -> Any:
    """The one device of a launch's tensors (cpu when there are none), else a `LaunchError` naming the first
    parameter on another device, or on one no launch supports."""
    import torch

    first: tuple[str, Any] | None = None
    for name, t in tensors.items():
        if first is None:
            first = (name, t.device)
        elif t.device != first[1]:
            raise LaunchError(f"parameter {name}: on {t.device} but parameter {first[0]} is on {first[1]}; "
                              f"all tensors of one launch must be on one device")
    if first is None:
        return torch.device("cpu")
    if first[1].type not in SUPPORTED_DEVICES:
        raise LaunchError(f"parameter {first[0]}: tensors on {first[1]} cannot be launched; "
                          f"expected cpu tensors (Triton interpreter) or cuda tensors")
    return first[1]


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool_", "bool"))


def check_scalar(name: str, dtype: str, value: Any) -> int | float | bool:
    """The value a scalar parameter `name` of dtype `dtype` (a name: "i32", "f16", "pred", ...) passes, from
    a Python or NumPy scalar; a `LaunchError` naming the parameter when it is of the wrong kind or does not
    fit the dtype (float infinities and NaN fit every float dtype)."""
    if value is None:
        raise LaunchError(f"parameter {name}: expected a {dtype} scalar, got None")
    is_bool = _is_bool(value)
    if dtype == "pred":
        if not is_bool:
            raise LaunchError(f"parameter {name}: expected a bool (pred scalar), got {type_name(value)}")
        return bool(value)
    if dtype in INT_RANGES:
        if is_bool or not isinstance(value, numbers.Integral):
            raise LaunchError(f"parameter {name}: expected an int ({dtype} scalar), got {type_name(value)}")
        lo, hi = INT_RANGES[dtype]
        if not lo <= int(value) <= hi:
            raise LaunchError(f"parameter {name}: {int(value)} does not fit {dtype} (range {lo}..{hi})")
        return int(value)
    if is_bool or not isinstance(value, numbers.Real):
        raise LaunchError(f"parameter {name}: expected a float or int ({dtype} scalar), got {type_name(value)}")
    number = float(value)
    if math.isfinite(number) and abs(number) > FLOAT_MAX[dtype]:
        raise LaunchError(f"parameter {name}: {value} does not fit {dtype} (largest finite value "
                          f"{FLOAT_MAX[dtype]:g})")
    return number

DEVICE_CHECK = "device check failed: "  # how every device check's message begins
CHECK_TOKEN = re.compile(r"intent_check_[0-9a-f]{16}")  # what a failed check's assertion text carries


def settle(pending: list[T], resolve: Callable[[T], bool]) -> None:
    """Resolve the items of `pending` until none of those left can be: `resolve(item)` binds what it can from
    the item and says whether the item is done (an item may need what a later one binds). What cannot be
    resolved is left in `pending`."""
    progress = True
    while pending and progress:
        progress = False
        for item in list(pending):
            if resolve(item):
                pending.remove(item)
                progress = True


def solve_affine(at: Callable[[int], int], extent: int) -> int | None:
    """The integer v with `at(v) == extent` when `at` is affine in v (`S`, `S + c`, `2 * S - c`, ...);
    None when there is none or `at` is not affine (a division by zero counts as not affine)."""
    try:
        base, slope = at(0), at(1) - at(0)
        if slope == 0 or (extent - base) % slope:
            return None
        value = (extent - base) // slope
        return value if at(value) == extent and at(value + 1) - at(value) == slope else None
    except ZeroDivisionError:
        return None


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The element strides of a freshly allocated (row-major, contiguous) tensor of `shape`."""
    strides, acc = [], 1
    for e in reversed(shape):
        strides.append(acc)
        acc *= max(e, 1)
    return tuple(reversed(strides))


def byte_range(t: Any) -> tuple[int, int] | None:
    """The bytes a tensor reaches from its data pointer, as [start, end); None when it is empty."""
    if t.numel() == 0:
        return None
    span = sum((e - 1) * abs(s) for e, s in zip(t.shape, t.stride())) + 1
    start = t.data_ptr()
    return start, start + span * t.element_size()


def self_overlap(t: Any) -> str | None:
    """Why two elements of `t` may share memory, or None when its strides keep them apart."""
    axes = sorted(((s, e, a) for a, (e, s) in enumerate(zip(t.shape, t.stride())) if e > 1), key=lambda x: x[0])
    reach = 0  # the largest offset the faster axes span
    for s, e, a in axes:
        if s == 0:
            return f"axis {a} has stride 0 (a broadcast view)"
        if s <= reach:
            return f"axis {a} has stride {s}, which revisits elements of the faster axes"
        reach += (e - 1) * s
    return None


def check_overlap(params: Sequence[tuple[str, str]], tensors: Mapping[str, Any]) -> None:
    """Memory a kernel writes is reached through one parameter only: `params` are (name, role) in parameter
    order (role "in", "out" or "inout"), `tensors` the tensors given (and allocated) by name.

    Prebuilt kernels use this conservative form: parameters whose byte ranges intersect are refused even
    when their elements interleave without sharing a byte (`y[:, :N]` and `y[:, N:]`); the compiler's
    launcher decides that case exactly (`emit_triton.arguments.views_share_memory`, with Z3)."""
    present = [(name, role) for name, role in params if name in tensors]
    for name, role in present:
        if role != "in" and tensors[name].numel() > 0:
            why = self_overlap(tensors[name])
            if why is not None:
                raise LaunchError(f"parameter {name}: {why}; the elements of a parameter that the kernel writes "
                                  f"must not share memory")
    ranges = {name: byte_range(tensors[name]) for name, _ in present}
    for i, (p, p_role) in enumerate(present):
        for q, q_role in present[i + 1:]:
            if p_role == "in" and q_role == "in":
                continue  # reading the same memory twice is harmless
            a, b = ranges[p], ranges[q]
            if a is None or b is None or a[1] <= b[0] or b[1] <= a[0]:
                continue
            writer, other = (q, p) if q_role != "in" else (p, q)
            raise LaunchError(f"parameter {writer}: its memory overlaps parameter {other}; memory the kernel writes "
                              f"may be reached through one parameter only (pass the tensor once, as an inout "
                              f"parameter, to read and write it)")


def device_check_failure(exc: BaseException, messages: Mapping[str, str]) -> str | None:
    """The message of the device check that `exc` reports, if it reports one (`messages`: by check token)."""
    seen: BaseException | None = exc
    while seen is not None:
        found = CHECK_TOKEN.search(str(seen))
        if found is not None and found.group(0) in messages:
            return messages[found.group(0)]
        if "device-side assert" in str(seen):
            return f"{DEVICE_CHECK}a device check of the kernel failed on the device (its message is on the " \
                   f"device's standard output; run with CPU tensors to have it here)"
        seen = seen.__cause__ or seen.__context__
    return None
