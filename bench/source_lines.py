"""Lines of generated Triton source per acceptance kernel (the first case's specialisation).

    python bench/source_lines.py [--acceptance DIR] [--show LABEL]

Counts every line of the emitted module (helpers included) and, separately, the kernel function's
own lines that are neither blank nor comments. `--show LABEL` prints one kernel's source instead.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository's packages, not bench/'s siblings
    _ROOT = Path(__file__).resolve().parent.parent
    sys.path[:] = [str(_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != _ROOT / "bench"]

import emit_triton  # noqa: E402
import physical  # noqa: E402
from bench.compile import acceptance_subjects, default_acceptance_dir  # noqa: E402
from bench.report import markdown_table  # noqa: E402


def source_of(subject) -> str:  # type: ignore[no-untyped-def]
    return emit_triton.emit(physical.lower(subject.kernel.specialize(subject.args))).source


def counts(source: str) -> tuple[int, int]:
    """(all lines, code lines: neither blank nor comment-only)."""
    lines = source.rstrip("\n").split("\n")
    code = [s for s in lines if s.strip() and not s.strip().startswith("#")]
    return len(lines), len(code)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--acceptance", type=Path, default=None, help="directory of acceptance kernels")
    ap.add_argument("--show", default=None, help="print the source of the kernel with this label")
    opts = ap.parse_args(argv)
    subjects = acceptance_subjects(opts.acceptance or default_acceptance_dir())
    if opts.show is not None:
        for s in subjects:
            if s.label == opts.show:
                print(source_of(s), end="")
                return 0
        print(f"no acceptance kernel {opts.show!r} (have: {', '.join(s.label for s in subjects)})", file=sys.stderr)
        return 2
    rows = []
    total = [0, 0]
    for s in subjects:
        n, code = counts(source_of(s))
        total[0] += n
        total[1] += code
        rows.append([s.label, str(n), str(code)])
    rows.append(["total", str(total[0]), str(total[1])])
    print(markdown_table(["kernel", "lines", "code lines"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
