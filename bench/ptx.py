"""PTX quality per bench kernel for sm_90a: vector widths of global accesses, registers, spills.

    python bench/ptx.py [--quick] [--only FAMILY ...] [--arch 90|80]

Each kernel is compiled ahead of time (no GPU) with the specialisation a launch at the bench size
gets (`kernel.ptx(arch=90, **args)`; Triton targets sm_90a for arch 90). Global loads and stores
in the PTX are counted by width: 128-bit (`.v4.b32`, `.v2.b64`, ...), 64-bit, 32-bit and narrower
(static instruction counts, not dynamic). Registers and spill bytes come from Triton's bundled
`ptxas -v`. Targets: every contiguous-f32 kernel has 128-bit global loads; no kernel spills.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository's packages, not bench/'s siblings
    _ROOT = Path(__file__).resolve().parent.parent
    sys.path[:] = [str(_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != _ROOT / "bench"]

import torch  # noqa: E402

from bench.kernels import BenchCase, one_per_kernel  # noqa: E402
from bench.report import failure_text, markdown_table, verdict  # noqa: E402
from intent.runtime import triton_adapter as adapter  # noqa: E402

# `ld.global.nc.v4.f32`, `@%p1 st.global.v2.b64`, `ld.global.L1::evict_last.b32`, ...
_ACCESS = re.compile(r"^\s*(?:@!?%\w+\s+)?(ld|st)\.global((?:\.[\w:]+)*)\s")
_ATOMIC = re.compile(r"^\s*(?:@!?%\w+\s+)?(atom|red)\.global[.\s]")
_TYPE = re.compile(r"^[bfsu](\d+)$")
_VECTOR = re.compile(r"^v(\d+)$")


@dataclass
class AccessCounts:
    """Static global accesses by kind ("ld"/"st") and width in bits."""

    widths: Counter[tuple[str, int]] = field(default_factory=Counter)
    atomics: int = 0

    def count(self, kind: str, bits: int) -> int:
        return self.widths[(kind, bits)]

    def narrow(self, kind: str) -> int:
        """Accesses narrower than 32 bits."""
        return sum(n for (k, bits), n in self.widths.items() if k == kind and bits < 32)


def global_accesses(ptx: str) -> AccessCounts:
    """Count `ld.global`/`st.global` by access width (vector length x element bits) and atomics."""
    out = AccessCounts()
    for line in ptx.splitlines():
        if _ATOMIC.match(line):
            out.atomics += 1
            continue
        m = _ACCESS.match(line)
        if m is None:
            continue
        lanes, bits = 1, 0
        for part in m.group(2).split(".")[1:]:
            if (v := _VECTOR.match(part)) is not None:
                lanes = int(v.group(1))
            elif (t := _TYPE.match(part)) is not None:
                bits = int(t.group(1))
        out.widths[(m.group(1), lanes * bits)] += 1
    return out


@dataclass(frozen=True)
class PtxasInfo:
    registers: int
    spill_stores: int  # bytes
    spill_loads: int  # bytes
    stack_frame: int  # bytes


_REGISTERS = re.compile(r"Used (\d+) registers")
_SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def ptxas_path(arch: int = 90) -> Path:
    """The ptxas Triton itself assembles sm_<arch> with (`triton_adapter.ptxas_path`)."""
    return adapter.ptxas_path(arch)


# The flags Triton's own cubin step passes (the launcher compiles with fp fusion off), so registers and spills are
# those of the cubin that runs.
PTXAS_FLAGS = ("-lineinfo", "--fmad=false", "--regAllocOptLevel=2")


def ptxas_info(ptx: str, gpu_name: str = "sm_90a") -> PtxasInfo:
    """Run `ptxas -v` on `ptx`; registers and spill bytes of its (single) entry."""
    arch = int(re.sub(r"\D", "", gpu_name) or 90)
    with tempfile.TemporaryDirectory(prefix="intent-ptx-") as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(ptx)
        done = subprocess.run([str(ptxas_path(arch)), "-v", *PTXAS_FLAGS, f"--gpu-name={gpu_name}", str(src), "-o",
                               str(Path(tmp) / "kernel.cubin")], capture_output=True, text=True, check=False)
    log = done.stdout + done.stderr
    if done.returncode != 0:
        raise RuntimeError(f"ptxas failed: {log.strip().splitlines()[-1] if log.strip() else done.returncode}")
    regs = _REGISTERS.search(log)
    spills = _SPILLS.search(log)
    if regs is None or spills is None:
        raise RuntimeError(f"cannot read ptxas -v output: {log.strip()[:200]}")
    return PtxasInfo(int(regs.group(1)), int(spills.group(2)), int(spills.group(3)), int(spills.group(1)))


def gpu_name_of(ptx: str) -> str:
    m = re.search(r"^\.target\s+(sm_\w+)", ptx, re.MULTILINE)
    return m.group(1) if m else "sm_90a"


@dataclass
class Row:
    case: BenchCase
    target: str = "-"
    accesses: AccessCounts | None = None
    info: PtxasInfo | None = None
    error: str | None = None

    @property
    def vector_ok(self) -> bool | None:
        if not self.case.contiguous_f32:
            return None
        return self.accesses is not None and self.accesses.count("ld", 128) > 0

    @property
    def spill_ok(self) -> bool:
        return self.info is not None and self.info.spill_stores == 0 and self.info.spill_loads == 0

    @property
    def met(self) -> bool:
        return self.error is None and self.spill_ok and self.vector_ok is not False


def measure(case: BenchCase, arch: int = 90) -> Row:
    args = case.build(torch.device("cpu"), torch.Generator().manual_seed(0))
    row = Row(case)
    try:
        ptx = case.kernel.ptx(arch=arch, **args)
        row.target = gpu_name_of(ptx)
        row.accesses = global_accesses(ptx)
        row.info = ptxas_info(ptx, row.target)
    except Exception as exc:  # the table records a failing kernel instead of hiding it
        row.error = failure_text(exc)
    return row


HEADERS = ("kernel", "size", "target", "ld 128", "ld 64", "ld 32", "ld <32", "st 128", "st 64", "st 32", "st <32",
           "atomics", "registers", "spill B", "128-bit ld", "0 spills", "met", "notes")


def table(rows: list[Row]) -> str:
    out = []
    for r in rows:
        c = r.case
        if r.accesses is None or r.info is None:
            out.append((c.family, c.label, r.target) + ("-",) * 11 + ("-", "NO", "NO", f"FAILED: {r.error}"))
            continue
        a, i = r.accesses, r.info
        out.append((c.family, c.label, r.target, a.count("ld", 128), a.count("ld", 64), a.count("ld", 32),
                    a.narrow("ld"), a.count("st", 128), a.count("st", 64), a.count("st", 32), a.narrow("st"),
                    a.atomics, i.registers, i.spill_stores + i.spill_loads, verdict(r.vector_ok),
                    verdict(r.spill_ok), verdict(r.met), "" if c.contiguous_f32 else "not all contiguous f32"))
    return markdown_table(HEADERS, out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="specialise for the --quick traffic sizes")
    ap.add_argument("--only", nargs="*", metavar="FAMILY")
    ap.add_argument("--arch", type=int, default=90, choices=(80, 90))
    opts = ap.parse_args(argv)
    cases = [c for c in one_per_kernel("quick" if opts.quick else "full") if not opts.only or c.family in opts.only]
    rows = []
    for case in cases:
        rows.append(measure(case, opts.arch))
        print(f"compiled {case.name}", file=sys.stderr, flush=True)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
