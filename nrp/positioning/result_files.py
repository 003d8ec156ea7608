"""results.parquet and results.csv written from a scoring run's blocks of rows, a block at a time,
with the bytes ``to_parquet`` and ``to_csv`` (index left out) give the whole frame.

- **CSV**: each value is written alone, so the lines of a block are those of the whole frame;
  the header is written once, before the first block.
- **Parquet**: pandas writes one row group per ``ROW_GROUP`` rows (pyarrow's default), and its
  schema carries the frame's attrs, which a run knows only at its end. The blocks are kept as
  Arrow record batches in a spool file (a temporary file, deleted when the writer is closed);
  ``finish(attrs)`` then writes them in row groups of ``ROW_GROUP`` rows under the schema
  pandas gives the whole frame. So what is held is one row group, whatever the number of rows.
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

#: rows per Parquet row group: pyarrow's default, which ``to_parquet`` writes
ROW_GROUP = 1024 * 1024


class ResultFiles:
    """Writes ``parquet`` and ``csv`` (paths, typically partial files a caller renames) from
    blocks of a results frame: ``add(block)`` for each block in order, then ``finish(attrs)``
    with the whole frame's attrs; ``close()`` (also on leaving a ``with``) deletes the spool."""

    def __init__(self, parquet: Path, csv: Path):
        self.parquet = Path(parquet)
        self._csv = Path(csv).open("wb")  # noqa: SIM115 (closed by finish() or close())
        self._spool: Any = None  # temporary file of Arrow record batches
        self._writer: Any = None  # its IPC stream writer
        self._empty: pd.DataFrame | None = None  # the rows' columns and dtypes, no rows
        self._header = True  # the CSV header is still to be written
        self.attrs: dict[str, Any] = {}  # given to ``finish``
        self.finished = False

    def __enter__(self) -> ResultFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, block: pd.DataFrame) -> None:
        """The next block's rows (a block without rows adds nothing, as in a concatenation)."""
        import pyarrow as pa

        self._csv.write(block.to_csv(index=False, header=self._header).encode("utf-8"))
        self._header = False
        if not len(block):
            if self._empty is None:
                self._empty = block.iloc[:0]
            return
        table = pa.Table.from_pandas(block, preserve_index=False)
        if self._writer is None:
            self._empty = block.iloc[:0]  # the first block with rows gives the dtypes
            self._spool = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
            self._writer = pa.ipc.new_stream(self._spool, table.schema)
        self._writer.write_table(table)

    def finish(self, attrs: dict[str, Any]) -> None:
        """results.parquet written (the spool in row groups of ``ROW_GROUP`` rows, the schema
        that of the whole frame with ``attrs``) and results.csv closed."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._csv.close()
        self.attrs, self.finished = attrs, True
        empty = self._empty if self._empty is not None else pd.DataFrame()
        empty = empty.copy()
        empty.attrs.update(attrs)
        if self._writer is None:  # no rows: what to_parquet writes of the empty frame
            empty.to_parquet(self.parquet, index=False)
            return
        writer, self._writer = self._writer, None
        writer.close()
        header = io.BytesIO()
        empty.to_parquet(header, index=False)  # pandas' schema and metadata, attrs included
        header.seek(0)
        schema = pq.read_schema(header)
        self._spool.seek(0)
        with pq.ParquetWriter(self.parquet, schema, compression="snappy") as parquet:
            for group in _row_groups(pa.ipc.open_stream(self._spool), ROW_GROUP):
                # one chunk per column, as in the whole frame's table: chunks cut elsewhere
                # would cut its pages elsewhere
                table = pa.Table.from_batches(group).combine_chunks()
                group.clear()  # the batches freed (the list is the one the cutter holds)
                parquet.write_table(table.replace_schema_metadata(schema.metadata), ROW_GROUP)

    def close(self) -> None:
        self._csv.close()
        if self._writer is not None:
            self._writer.close()
        if self._spool is not None:
            self._spool.close()


def _row_groups(batches: Any, size: int) -> Iterator[list[Any]]:
    """The record batches cut into lists of ``size`` rows (the last one fewer)."""
    held: list[Any] = []
    count = 0
    for batch in batches:
        while count + batch.num_rows >= size:
            cut = size - count
            held.append(batch.slice(0, cut))
            yield held
            held, count = [], 0
            batch = batch.slice(cut)
        if batch.num_rows:
            held.append(batch)
            count += batch.num_rows
    if held:
        yield held
