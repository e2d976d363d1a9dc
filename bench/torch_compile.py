"""Intent kernels inside torch.compile: graph breaks, compiles across sizes, and the cost of the operator.

    python bench/torch_compile.py [--backend inductor|aot_eager] [--calls N]

For each case, a function calling Intent kernels (softmax; the RMSNorm, softmax and cross-entropy
forward/backward pairs of examples/, forward and backward) is compiled with `fullgraph=True` and run
on CPU tensors of several sizes, checked against torch. Columns: graph breaks (`torch._dynamo.explain`),
frames compiled over all sizes (the first size, then one dynamic graph: 2), and the result check.
A second table gives the host time of one eager call through the kernel object and through its torch
operator (`torch.ops.intent.*`, as a compiled program calls it), with Triton's own launch stubbed
out as in bench/launch.py; microseconds per call, median CPU time.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository's packages, not bench/'s siblings
    _ROOT = Path(__file__).resolve().parent.parent
    sys.path[:] = [str(_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != _ROOT / "bench"]

import torch  # noqa: E402
from torch._dynamo.testing import CompileCounterWithBackend  # noqa: E402

from bench.launch import interleaved, triton_stubbed  # noqa: E402
from bench.report import failure_text, markdown_table  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SIZES = (6, 10, 13)  # rows; the first compiles a static graph, the second a dynamic one


def example(name: str) -> Any:
    """A module of examples/ (registered in sys.modules: Dynamo reads globals through it)."""
    spec = importlib.util.spec_from_file_location(f"intent_bench_example_{name}", ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable[..., torch.Tensor]  # what is compiled
    reference: Callable[..., torch.Tensor]  # the same in torch
    inputs: Callable[[int], tuple[Any, ...]]  # rows -> arguments (tensors requiring grad are differentiated)


def cases() -> list[Case]:
    softmax_mod = example("softmax")
    rms, sm, ce = example("rmsnorm"), example("softmax_autograd"), example("cross_entropy")
    g = torch.Generator().manual_seed(0)

    def randn(*shape: int, grad: bool = False) -> torch.Tensor:
        return torch.randn(*shape, generator=g).requires_grad_(grad)

    return [
        Case("softmax (forward)", lambda x: softmax_mod.softmax(x * 2) + 1, lambda x: torch.softmax(x * 2, 1) + 1,
             lambda m: (randn(m, 32),)),
        Case("rmsnorm (forward+backward)", lambda x, w: rms.rmsnorm(x, w, 1e-6).square().sum(),
             lambda x, w: torch.nn.functional.rms_norm(x, (x.shape[1],), w, 1e-6).square().sum(),
             lambda m: (randn(m, 32, grad=True), randn(32, grad=True))),
        Case("softmax (forward+backward)", lambda x: (sm.softmax(x) * torch.arange(32.0)).sum(),
             lambda x: (torch.softmax(x, 1) * torch.arange(32.0)).sum(), lambda m: (randn(m, 32, grad=True),)),
        Case("cross entropy (forward+backward)", lambda x, t: ce.cross_entropy(x, t).mean(),
             lambda x, t: torch.nn.functional.cross_entropy(x, t),
             lambda m: (randn(m, 32, grad=True), torch.randint(0, 32, (m,), generator=g))),
    ]


@dataclass
class Row:
    case: Case
    graph_breaks: int | None = None
    frames: int | None = None
    error: str | None = None


def measure(case: Case, backend: str, sizes: tuple[int, ...] = SIZES) -> Row:
    row = Row(case)
    torch._dynamo.reset()
    try:
        row.graph_breaks = torch._dynamo.explain(case.fn)(*case.inputs(sizes[0])).graph_break_count
        torch._dynamo.reset()
        counter = CompileCounterWithBackend(backend)
        compiled = torch.compile(case.fn, fullgraph=True, backend=counter)
        for m in sizes:
            args = case.inputs(m)
            got, want = compiled(*args), case.reference(*args)
            torch.testing.assert_close(got, want)
            grads = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
            if grads:
                for a, b in zip(torch.autograd.grad(got, grads), torch.autograd.grad(want, grads)):
                    torch.testing.assert_close(a, b)
        row.frames = counter.frame_count
    except Exception as exc:  # a failing case is a row, not a crash of the whole table
        row.error = failure_text(exc)
    return row


def table(rows: list[Row], sizes: tuple[int, ...] = SIZES) -> str:
    out = []
    for r in rows:
        if r.error is not None:
            out.append((r.case.name, "-", "-", f"FAILED: {r.error}"))
        else:
            out.append((r.case.name, str(r.graph_breaks), str(r.frames), "matches torch"))
    sizes_text = ", ".join(map(str, sizes))
    return markdown_table(("function", "graph breaks", f"frames compiled (rows {sizes_text})", "check"), out)


def operator_overhead(calls: int) -> str:
    """Host time of an eager call through the kernel object and through its torch operator (Triton stubbed)."""
    from intent import torch_op

    softmax = example("softmax").softmax
    x = torch.randn(4, 32)
    kernel = softmax.specialize({"x": x})
    op = torch_op.op_for(kernel, {"x"}).op
    with triton_stubbed():
        softmax(x)
        op(x)
        direct, through_op = interleaved([lambda: softmax(x), lambda: op(x)], calls)
    return markdown_table(("softmax call", "us (cpu, median)", "us (best batch)"),
                          [("kernel object (eager launch)", f"{direct.cpu_us:.1f}", f"{direct.best_us:.1f}"),
                           ("torch.ops.intent operator", f"{through_op.cpu_us:.1f}", f"{through_op.best_us:.1f}")])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="inductor", help="torch.compile backend (default inductor)")
    ap.add_argument("--calls", type=int, default=2000, help="timed calls per column of the overhead table")
    opts = ap.parse_args(argv)
    rows = [measure(c, opts.backend) for c in cases()]
    print(table(rows))
    print()
    print(operator_overhead(opts.calls))
    return 1 if any(r.error for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
