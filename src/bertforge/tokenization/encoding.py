"""The result of :meth:`BertTokenizer.__call__`: a dict of model inputs with a few helpers."""

from __future__ import annotations

from typing import Any

__all__ = ["BatchEncoding", "to_tensors"]


class BatchEncoding(dict):
    """Model inputs by name (``input_ids``, ``token_type_ids``, ``attention_mask``, ...).

    A plain ``dict`` so it can be passed as ``model(**enc)``, saved or compared;
    keys are also readable as attributes (``enc.input_ids``). Values are lists for
    a single text, lists of lists for a batch, or tensors/arrays when requested.
    ``word_ids(i)`` / ``sequence_ids(i)`` give, for row ``i``, the word index and
    the sequence index (0 text, 1 pair, None special/padding) of every token.
    """

    def __init__(
        self,
        data: dict[str, Any] | None = None,
        *,
        word_ids: list[list[int | None]] | None = None,
        sequence_ids: list[list[int | None]] | None = None,
        is_batched: bool = True,
    ) -> None:
        super().__init__(data or {})
        self._word_ids = word_ids
        self._sequence_ids = sequence_ids
        self._is_batched = is_batched

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"BatchEncoding has no key or attribute {name!r} (keys: {sorted(self)})") from None

    # dict pickles its items but not instance attributes without this
    def __reduce__(self):
        def materialise(rows):
            return None if rows is None else [list(rows[i]) for i in range(len(rows))]

        state = {
            "_word_ids": materialise(self._word_ids),
            "_sequence_ids": materialise(self._sequence_ids),
            "_is_batched": self._is_batched,
        }
        return (BatchEncoding, (dict(self),), state)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def is_batched(self) -> bool:
        """True when the values have a leading batch (row) dimension."""
        return self._is_batched

    def word_ids(self, batch_index: int = 0) -> list[int | None]:
        """Word index of each token of row ``batch_index`` (None for special and padding tokens)."""
        return self._row(self._word_ids, batch_index, "word_ids")

    def sequence_ids(self, batch_index: int = 0) -> list[int | None]:
        """0 for tokens of the text, 1 for tokens of the pair, None for special and padding tokens."""
        return self._row(self._sequence_ids, batch_index, "sequence_ids")

    def _row(self, rows: list[list[int | None]] | None, index: int, what: str) -> list[int | None]:
        if rows is None:
            raise ValueError(f"{what} are not available: this BatchEncoding was not built by BertTokenizer.__call__")
        if not -len(rows) <= index < len(rows):
            raise IndexError(f"batch_index {index} out of range for {len(rows)} row(s)")
        return rows[index]


def to_tensors(data: dict[str, Any], return_tensors: str, is_batched: bool) -> dict[str, Any]:
    """Convert list values to ``torch`` tensors (``"pt"``) or ``numpy`` arrays (``"np"``).

    Ragged rows cannot form a tensor; the error says to pad instead of failing
    deep inside torch.
    """
    import numpy as np

    out: dict[str, Any] = {}
    for key, value in data.items():
        rows = value if is_batched else [value]
        if rows and len({len(r) for r in rows}) > 1:
            raise ValueError(
                f"cannot make a tensor of {key!r}: the rows have different lengths "
                f"({min(map(len, rows))} to {max(map(len, rows))} tokens). Pass padding=True "
                "(or padding='max_length' with max_length) when asking for return_tensors."
            )
        if key == "offset_mapping":
            array = np.asarray(value, dtype=np.int64).reshape((len(rows), -1, 2) if is_batched else (-1, 2))
        else:
            array = np.asarray(value, dtype=np.int64)
        if return_tensors == "pt":
            import torch

            out[key] = torch.from_numpy(array)
        else:
            out[key] = array
    return out
