"""Union-find over item positions: the one grouping helper of image and text deduplication."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")


class UnionFind:
    def __init__(self, size: int):
        self.parent = list(range(size))

    def find(self, index: int) -> int:
        root = index
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[index] != root:  # path compression
            self.parent[index], index = root, self.parent[index]
        return root

    def union(self, first: int, second: int) -> None:
        a, b = self.find(first), self.find(second)
        if a != b:
            self.parent[max(a, b)] = min(a, b)


def groups_from_pairs(size: int, pairs: Iterable[tuple[int, int]]) -> list[list[int]]:
    """Connected components of the pair graph with two or more members, each sorted, in order of first member."""
    forest = UnionFind(size)
    for first, second in pairs:
        forest.union(first, second)
    members: dict[int, list[int]] = {}
    for index in range(size):
        members.setdefault(forest.find(index), []).append(index)
    return sorted((group for group in members.values() if len(group) > 1), key=lambda group: group[0])


def pick_kept(group: Sequence[int], items: Sequence[T], preference: Callable[[T], tuple]) -> int:
    """The member whose preference tuple is smallest (put 'better' first by negating sizes)."""
    return min(group, key=lambda index: preference(items[index]))
