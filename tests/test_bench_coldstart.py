"""bench/coldstart.py: the flow of the measurement (one run of each), not its speed."""

from __future__ import annotations

from bench import coldstart


def test_one_run_of_each_measurement_prints_the_table(capsys) -> None:
    assert coldstart.main(["--runs", "1"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in out.splitlines() if line.startswith("| ") and not line.startswith("| measurement")}
    assert set(rows) == {"import intent", "first call, compiled form on disk", "first call, empty cache (for scale)"}
    assert rows["import intent"][-1] == "none"  # no heavy module imported by `import intent`
    on_disk = rows["first call, compiled form on disk"][-1]
    assert "torch" in on_disk and "networkx" not in on_disk and "emit_triton.emit" not in on_disk
    assert "networkx" in rows["first call, empty cache (for scale)"][-1]
    assert float(rows["import intent"][0]) > 0 and float(rows["first call, compiled form on disk"][0]) > 0
