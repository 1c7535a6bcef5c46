"""The repository's conftest.py: ``--shuffle-modules SEED`` shuffles files, never the tests inside one."""

from pathlib import Path

import pytest

ROOT_CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

FILES = {f"test_{name}": "\n".join(f"def test_{name}_{i}(): pass" for i in range(3)) for name in "abcdef"}


@pytest.fixture
def suite(pytester):
    pytester.makeconftest(ROOT_CONFTEST.read_text())
    pytester.makepyfile(**FILES)
    return pytester


def run_order(suite, *args) -> list[str]:
    result = suite.runpytest("-v", *args)
    result.assert_outcomes(passed=3 * len(FILES))
    return [line.split("::")[1].split()[0] for line in result.outlines if "::test_" in line and "PASSED" in line]


def test_without_a_seed_files_run_in_collection_order(suite):
    order = run_order(suite)
    assert order == [f"test_{n}_{i}" for n in "abcdef" for i in range(3)]


def test_a_seed_shuffles_files_and_keeps_each_files_tests_together_and_in_order(suite):
    order = run_order(suite, "--shuffle-modules", "7")
    files = [name.split("_")[1] for name in order]
    blocks = [files[i] for i in range(0, len(files), 3)]
    assert all(files[i:i + 3] == [files[i]] * 3 for i in range(0, len(files), 3)), order
    assert sorted(blocks) == list("abcdef") and blocks != list("abcdef"), blocks
    assert all(order[i:i + 3] == [f"test_{b}_{j}" for j in range(3)] for i, b in zip(range(0, 18, 3), blocks))


def test_the_same_seed_gives_the_same_order_and_the_header_names_it(suite):
    assert run_order(suite, "--shuffle-modules", "7") == run_order(suite, "--shuffle-modules", "7")
    assert run_order(suite, "--shuffle-modules", "7") != run_order(suite, "--shuffle-modules", "8")
    result = suite.runpytest("--shuffle-modules", "7")
    result.stdout.fnmatch_lines(["*test files shuffled: --shuffle-modules 7*"])
