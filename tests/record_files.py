"""The same records as the files users keep them in: Parquet, an Arrow IPC file, a `datasets` save_to_disk folder.

Written through `datasets` (so ClassLabel features travel in the files' schema metadata, as in files `datasets`
writes) or, for `plain=True`, through pyarrow alone (no `datasets` metadata, as any other tool writes them).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from needs import require_module


def record_copies(folder: Path, columns: dict[str, list[Any]], features: Any = None, *, name: str = "t",
                  plain: bool = False) -> list[Path]:
    """[name.parquet, name.arrow, name/ (a save_to_disk folder)] holding `columns` (with `features`, if given)."""
    pa = require_module("pyarrow", "pip install 'bertforge[data]'")
    import pyarrow.parquet as pq
    datasets = require_module("datasets")
    datasets.disable_progress_bars()
    folder.mkdir(parents=True, exist_ok=True)
    dataset = datasets.Dataset.from_dict(columns, features=features)
    table = pa.table(columns) if plain else dataset.data.table
    pq.write_table(table, folder / f"{name}.parquet")
    with pa.OSFile(str(folder / f"{name}.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    dataset.save_to_disk(str(folder / name))
    return [folder / f"{name}.parquet", folder / f"{name}.arrow", folder / name]
