"""``benchmarks/bench_exact_selection.py`` runs, and the two generations it times give the same
results bit for bit on its finite inputs, at a release where the selections run (2026.05)."""

from __future__ import annotations

import pytest
from benchmark_scripts import load_benchmark


def test_the_benchmark_times_both_generations_and_they_agree(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = load_benchmark("bench_exact_selection")
    assert bench.main(["--repeats", "1", "--stack", "2026.05"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert len(rows) == 3
    for row in rows:
        assert row[-1] == "True", row  # same logits / hidden states, bit for bit
        first_ops, exact_ops = (int(n) for n in row[-2].split("->"))
        assert exact_ops > first_ops  # the selections ran, and carried their codes
