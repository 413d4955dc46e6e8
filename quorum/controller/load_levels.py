"""Brokers grouped by load for placement: the least-loaded ones found without scanning them all.

A `LoadLevels` holds items grouped by an integer load, each group kept sorted. An item is a
broker's position in id order, or a sort key that ends in it (`replicas * slots + position`).
Placement only ever adds one to a broker's load, so the loads present stay few (two or three in a
balanced cluster) and a move costs a binary search and a list insertion: a decision's cost per
replica does not grow with the broker count.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Container, Iterable


class LoadLevels:
    """Items grouped by load, loads ascending and items sorted within each; every load present
    holds at least one item. Mutable: one placer's working state, never shared."""

    def __init__(self, loaded_items: Iterable[tuple[int, int]]) -> None:
        self._levels: dict[int, list[int]] = {}
        for load, item in loaded_items:
            self._levels.setdefault(load, []).append(item)
        for items in self._levels.values():
            items.sort()
        self._loads = sorted(self._levels)

    def lowest(self) -> int:
        """The first item of the lowest load; there must be one."""
        return self._levels[self._loads[0]][0]

    def move(self, item: int, load: int, *, to_item: int, to_load: int) -> None:
        """Replaces `item`, which must be at `load`, with `to_item` at `to_load`."""
        levels = self._levels
        items = levels[load]
        index = bisect_left(items, item)
        assert items[index] == item, f"{item} is not at load {load}"
        del items[index]
        if to_load == load:
            insort(items, to_item)
            return
        if not items:
            del levels[load]
            self._loads.remove(load)
        target = levels.get(to_load)
        if target is None:
            levels[to_load] = [to_item]
            insort(self._loads, to_load)
        else:
            insort(target, to_item)

    def nearest(self, start: int, skip: Container[int]) -> tuple[int, int] | None:
        """`(load, item)` of the least-loaded item not in `skip`, the first at or after `start`
        (going round past the last) among equal loads; None when every one is skipped.

        Looks at no more than `len(skip) + 1` items and `len(skip) + 1` loads."""
        for load in self._loads:
            items = self._levels[load]
            count = len(items)
            first = bisect_left(items, start)
            for offset in range(count):
                item = items[(first + offset) % count]
                if item not in skip:
                    return load, item
        return None
