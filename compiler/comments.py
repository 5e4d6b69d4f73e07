"""The listing's per-instruction comments, formatted only when read.

A naive 1024^3 GEMM has ~800 K instructions; formatting a comment for each
would cost more than compiling them, and the listing is rarely printed.
Instructions emitted as columns keep a template and their integer arguments;
the text is made on lookup.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np


class Comments(Mapping[int, str]):
    """Instruction index -> comment: literal texts plus templated ones (``str.format`` of integers).

    Args:
        literal: Comments given as text, by instruction index.
        templated: ``(indices, template, args)``: instruction ``indices[i]`` has the comment
            ``template.format(*(a[i] for a in args))``.
    """

    def __init__(self, literal: Mapping[int, str],
                 templated: list[tuple[np.ndarray, str, tuple[np.ndarray, ...]]]) -> None:
        self._literal = dict(literal)
        self._raw = templated
        # Made on first use: each template's indices sorted (for a binary search) with their arguments
        # as rows, and every index with a comment.
        self._table: list[tuple[np.ndarray, str, np.ndarray]] | None = None
        self._index: np.ndarray | None = None

    def _templated(self) -> list[tuple[np.ndarray, str, np.ndarray]]:
        if self._table is None:
            self._table = []
            for idx, text, args in self._raw:
                order = np.argsort(idx, kind="stable")
                rows = np.stack(args, axis=1) if args else np.zeros((len(idx), 0), np.int64)
                self._table.append((idx[order], text, rows[order]))
        return self._table

    def _indices(self) -> np.ndarray:
        if self._index is None:
            self._index = np.sort(np.concatenate([np.fromiter(self._literal, np.int64, len(self._literal)),
                                                  *(idx for idx, _, _ in self._raw)]))
        return self._index

    def __getitem__(self, index: int) -> str:
        if index in self._literal:
            return self._literal[index]
        for idx, text, args in self._templated():
            row = int(np.searchsorted(idx, index))
            if row < len(idx) and idx[row] == index:
                return text.format(*args[row].tolist())
        raise KeyError(index)

    def __iter__(self) -> Iterator[int]:
        return iter(self._indices().tolist())

    def __len__(self) -> int:
        return len(self._literal) + sum(len(idx) for idx, _, _ in self._raw)


__all__ = ["Comments"]
