"""Traceability meta-test (testing.md §3.4): every case id of testing.md §5 has a matching test name.

A test implements case ``K5`` when its function name contains ``k5`` or ``k05`` as a separate token, optionally
followed by a variant letter (``test_k05_claim_conflict``, ``test_g01_g02_...``, ``test_d07a_...``). The id list
is copied from testing.md §5.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

AREAS = {
    "A": 9, "B": 12, "C": 12, "D": 16, "E": 12, "F": 16, "G": 26, "H": 21, "I": 29, "J": 22,
    "K": 49, "L": 4, "M": 21, "N": 8, "O": 12,
}  # fmt: skip
CASE_IDS = [f"{area}{n}" for area, count in AREAS.items() for n in range(1, count + 1)]
TESTS = Path(__file__).resolve().parent


def collect_test_names() -> set[str]:
    names: set[str] = set()
    for path in TESTS.rglob("test_*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_"):
                names.add(node.name)
    return names


def covered(case_id: str, names: set[str]) -> bool:
    area, number = case_id[0].lower(), int(case_id[1:])
    pattern = re.compile(rf"(?:^|_){area}0?{number}[a-z]?(?=_|$)")
    return any(pattern.search(name) for name in names)


def test_every_case_id_has_a_test() -> None:
    assert len(CASE_IDS) == 269
    names = collect_test_names()
    missing = [case for case in CASE_IDS if not covered(case, names)]
    assert not missing, f"case ids without a test: {', '.join(missing)}"
