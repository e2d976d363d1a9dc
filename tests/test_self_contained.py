"""The suite stands on its own: nothing in tests/ reads outside the checkout, and the README's test command
is what CI runs, with the shared acceptance runner only where a ../shared directory exists."""

from __future__ import annotations

import re
from pathlib import Path

from tests import acceptance

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = re.compile(r"""\.\./shared|["']shared["']\s*/\s*["']acceptance|ROOT\.parent|REPO\.parent""")
PARENTS = re.compile(r"__file__\)\.resolve\(\)\.parents\[(\d+)\]")


def escapes(path: Path, line: str) -> bool:
    """The line names a directory outside the checkout (`Path(__file__).resolve().parents[k]` above the root)."""
    depth = len(path.relative_to(ROOT).parts) - 1  # parents[depth] of a file is the checkout's root
    return bool(OUTSIDE.search(line)) or any(int(k) > depth for k in PARENTS.findall(line))


def readme_test_command() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("Run the whole test suite", 1)[1]
    return re.search(r"```bash\n(.*?)\n```", section, re.S).group(1).strip()  # type: ignore[union-attr]


def test_no_test_reads_outside_the_checkout() -> None:
    me = Path(__file__).resolve()
    offenders = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "tests").rglob("*.py")) if p != me
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if escapes(p, line)]
    assert offenders == []


def test_the_readme_test_command_needs_nothing_beside_the_clone() -> None:
    command = readme_test_command()
    assert "python -m pytest" in command and "shared" not in command


def test_ci_runs_the_readme_command_then_the_shared_runner_only_where_it_exists() -> None:
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert "set -euo pipefail" in lines
    assert readme_test_command() in lines
    runner = lines.index("python ../shared/acceptance/run.py")
    assert lines[runner - 1] == "if [ -d ../shared/acceptance ]; then" and lines[runner + 1] == "fi"
    assert lines.index(readme_test_command()) < runner


def test_the_project_has_its_own_acceptance_kernels() -> None:
    assert {p.stem for p in acceptance.FILES} >= {
        "vector_add", "softmax", "layernorm", "segment_sum", "recurrence", "matmul", "histogram", "cumsum",
        "dropout", "welford", "two_groups", "generic_dtype"}
    assert all("def cases(" in p.read_text(encoding="utf-8") for p in acceptance.FILES)
