"""bench/source_tree.py, the benches' one `--code` flag: a named tree must hold a pykraft
package, processes started for a tree run it (and this tree's run with no PYTHONPATH), this
process's environment is as it was afterwards, and rounds alternate the trees."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.source_tree import (
    THIS_TREE,
    add_code_argument,
    each_tree,
    in_round_order,
    source_tree,
    trees_of,
)

CHILD_TIMEOUT_S = 60


def _parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_code_argument(parser)
    return parser.parse_args(argv)


def _child_pythonpath() -> str:
    """PYTHONPATH as a process started now with this process's environment sees it."""
    command = [sys.executable, "-c", "import os; print(os.environ.get('PYTHONPATH', '-'))"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _other_tree(tmp_path: Path) -> Path:
    (tmp_path / "old" / "pykraft").mkdir(parents=True)
    return tmp_path / "old"


def test_without_the_flag_a_bench_measures_this_tree_alone() -> None:
    assert trees_of(_parsed()) == [THIS_TREE]
    assert source_tree(".") is THIS_TREE
    assert THIS_TREE.label == "this tree"


def test_a_directory_without_a_pykraft_package_is_refused(tmp_path: Path) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="no pykraft package"):
        source_tree(str(tmp_path))
    with pytest.raises(SystemExit):
        _parsed("--code", str(tmp_path))


def test_trees_come_in_the_order_given_and_alternate_by_round(tmp_path: Path) -> None:
    old = _other_tree(tmp_path)
    trees = trees_of(_parsed("--code", str(old), "--code", "."))
    assert [tree.path for tree in trees] == [old.resolve(), None]
    assert trees[0].label == str(old)
    assert in_round_order(trees, 0) == trees
    assert in_round_order(trees, 1) == trees[::-1]
    assert in_round_order(trees, 2) == trees


def test_a_tree_is_first_on_its_processes_path_and_this_trees_have_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    old = source_tree(str(_other_tree(tmp_path)))
    assert old.env({"PYTHONPATH": "/elsewhere", "A": "1"}) == {
        "PYTHONPATH": str(old.path),
        "A": "1",
    }
    assert THIS_TREE.env({"PYTHONPATH": "/elsewhere", "A": "1"}) == {"A": "1"}
    seen = {tree.label: _child_pythonpath() for tree in each_tree([old, THIS_TREE])}
    assert seen == {old.label: str(old.path), "this tree": "-"}
    assert os.environ["PYTHONPATH"] == "/elsewhere"


def test_the_environment_is_restored_when_a_measurement_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTHONPATH", raising=False)
    old = source_tree(str(_other_tree(tmp_path)))
    with pytest.raises(RuntimeError), old.starting_processes():
        assert os.environ["PYTHONPATH"] == str(old.path)
        raise RuntimeError("the measurement failed")
    assert "PYTHONPATH" not in os.environ
