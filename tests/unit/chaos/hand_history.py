"""A history written by hand for the checkers' tests: one op a call, 10 ms apart."""

from __future__ import annotations

from typing import Self

from insync.chaos.ops import Op


class HandHistory:
    def __init__(self) -> None:
        self.ops: list[Op] = []

    def op(self, process: str, type_: str, f: str, **fields: object) -> Self:
        self.ops.append(Op(len(self.ops) * 10.0, process, type_, f, **fields))  # type: ignore[arg-type]
        return self
