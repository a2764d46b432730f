"""Every case of the catalogue in ``docs/testing.md`` (areas A–O, one table row per case) has a test.

A test implements case ``K5`` when its docstring names it (``Case K5: ...``, ``Cases K5, K46: ...``,
optionally with a variant letter, ``Case D7a``) or, in the older form, when its function name contains
``k5`` or ``k05`` as a separate token (``test_k05_claim_conflict``). See docs/testing.md#traceability.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent
CATALOGUE = TESTS.parent / "docs" / "testing.md"
CASE_ROW = re.compile(r"^\| ([A-O])(\d+) \|", re.M)
CASE_LABEL = re.compile(r"\bCases? ((?:[A-O]\d+[a-z]?(?:, | and |/)?)+)")


def catalogue() -> list[str]:
    """The case ids of the catalogue, in order."""
    text = CATALOGUE.read_text(encoding="utf-8")
    return [f"{area}{number}" for area, number in CASE_ROW.findall(text[text.index("\n## Case catalogue") :])]


def collect_tests() -> tuple[set[str], set[str]]:
    """(test function names, case ids named by test docstrings)."""
    names: set[str] = set()
    cases: set[str] = set()
    for path in TESTS.rglob("test_*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_"):
                names.add(node.name)
                for label in CASE_LABEL.finditer(ast.get_docstring(node) or ""):
                    cases.update(f"{a}{int(n)}" for a, n in re.findall(r"([A-O])(\d+)", label.group(1)))
    return names, cases


def covered(case_id: str, names: set[str], cases: set[str]) -> bool:
    if case_id in cases:
        return True
    area, number = case_id[0].lower(), int(case_id[1:])
    pattern = re.compile(rf"(?:^|_){area}0?{number}[a-z]?(?=_|$)")
    return any(pattern.search(name) for name in names)


def test_case_catalogue_is_numbered_without_gaps() -> None:
    ids = catalogue()
    assert len(ids) == len(set(ids)), "a case id appears twice in docs/testing.md"
    numbers: dict[str, list[int]] = defaultdict(list)
    for case in ids:
        numbers[case[0]].append(int(case[1:]))
    assert sorted(numbers) == list("ABCDEFGHIJKLMNO")
    for area, found in numbers.items():
        assert found == list(range(1, len(found) + 1)), f"area {area} is not numbered 1..{len(found)}"


def test_every_case_id_has_a_test() -> None:
    names, cases = collect_tests()
    missing = [case for case in catalogue() if not covered(case, names, cases)]
    assert not missing, f"case ids without a test: {', '.join(missing)}"
