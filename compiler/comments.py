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
        self._templated = []
        for idx, text, args in templated:
            order = np.argsort(idx, kind="stable")  # sorted, for the binary search of a lookup
            table = np.stack(args, axis=1) if args else np.zeros((len(idx), 0), np.int64)
            self._templated.append((idx[order], text, table[order]))
        total = len(self._literal) + sum(len(idx) for idx, _, _ in self._templated)
        self._index = np.sort(np.concatenate([np.fromiter(self._literal, np.int64, len(self._literal)),
                                              *(idx for idx, _, _ in self._templated)]))
        if len(np.unique(self._index)) != total:
            raise ValueError("two comments for one instruction")

    def __getitem__(self, index: int) -> str:
        if index in self._literal:
            return self._literal[index]
        for idx, text, args in self._templated:
            row = int(np.searchsorted(idx, index))
            if row < len(idx) and idx[row] == index:
                return text.format(*args[row].tolist())
        raise KeyError(index)

    def __iter__(self) -> Iterator[int]:
        return iter(self._index.tolist())

    def __len__(self) -> int:
        return len(self._index)


__all__ = ["Comments"]
