"""Which pykraft source tree a bench's processes run: the one `--code` flag of the benches that
take "before" figures in the same conditions (broker_restart, broker_scale, broker_cpu, client,
idle_partitions, latency, spark and log_open_close).

`--code DIR` names a directory holding a `pykraft` package: export a commit there with
`git archive REV | tar -x -C DIR/pykraft`, and build its extensions (or copy this tree's `*.so`
beside their `.pyx`), or that tree runs the pure-Python codec. `--code .` is this tree. The
flag repeats: a bench measures once per tree, in the order given, reversed every other round
where it has rounds, so trees share the machine's noise (bench/spark.py takes one: Spark's JVM
keeps the environment it started with); without the flag it measures this tree alone. The
processes a tree's measurement starts run that tree (it comes first on their PYTHONPATH; this
tree's have none); the bench's own process always runs this tree. Each bench's docstring says
which processes its measurement starts.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

THIS_TREE_NAME = "."


@dataclass(frozen=True)
class SourceTree:
    """A tree as `--code` named it (`name`) and its directory (`path`, resolved), or this tree
    (`path` None)."""

    name: str
    path: Path | None

    @property
    def is_this_tree(self) -> bool:
        return self.path is None

    @property
    def label(self) -> str:
        """What figures are labelled with: "this tree", or the directory as `--code` named it."""
        return "this tree" if self.path is None else self.name

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        """`base` for a process that runs this tree: PYTHONPATH is the tree's, or absent."""
        env = {key: value for key, value in base.items() if key != "PYTHONPATH"}
        if self.path is not None:
            env["PYTHONPATH"] = str(self.path)
        return env

    @contextmanager
    def starting_processes(self) -> Iterator[None]:
        """Within it, every process started with this process's environment (the integration
        helpers' controllers and brokers, Spark's JVM) runs this tree; the environment is as it
        was afterwards."""
        before = os.environ.pop("PYTHONPATH", None)
        if self.path is not None:
            os.environ["PYTHONPATH"] = str(self.path)
        try:
            yield
        finally:
            os.environ.pop("PYTHONPATH", None)
            if before is not None:
                os.environ["PYTHONPATH"] = before


THIS_TREE = SourceTree(THIS_TREE_NAME, None)


def source_tree(text: str) -> SourceTree:
    """`--code`'s argparse type: refuses a directory with no `pykraft` package in it, so a wrong
    path is not measured as this tree."""
    if text == THIS_TREE_NAME:
        return THIS_TREE
    path = Path(text).resolve()
    if not (path / "pykraft").is_dir():
        raise argparse.ArgumentTypeError(f"{text} holds no pykraft package directory")
    return SourceTree(text, path)


def add_code_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--code",
        type=source_tree,
        action="append",
        metavar="DIR",
        help="a directory holding a pykraft package ('.': this tree); repeat it to compare",
    )


def trees_of(args: argparse.Namespace) -> list[SourceTree]:
    """The trees `--code` named, in order; this tree alone without it."""
    trees: list[SourceTree] = args.code or [THIS_TREE]
    return trees


def in_round_order(trees: list[SourceTree], round_index: int) -> list[SourceTree]:
    """`trees` in the order round `round_index` (from 0) measures them: reversed every other
    round, so no tree always runs first."""
    return trees if round_index % 2 == 0 else trees[::-1]


def each_tree(trees: list[SourceTree], round_index: int = 0) -> Iterator[SourceTree]:
    """Each of `trees` in round order, with the processes started until the next one running it
    (`starting_processes`); where there are several, a line names each before its figures."""
    for tree in in_round_order(trees, round_index):
        if len(trees) > 1:
            print(f"-- {tree.label}", flush=True)
        with tree.starting_processes():
            yield tree
