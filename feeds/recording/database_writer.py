"""Pick the recorder's writer for the default database.

Kept apart from the writers themselves: the writer process (copy_process) and the
in-process writers (tick_writer) do not know of each other, only this choice does.
"""

from __future__ import annotations

from django.conf import settings
from django.db import connection

from feeds.recording.copy_process import CopyProcessWriter
from feeds.recording.tick_writer import (
    COPY_TYPES,
    BulkInsertWriter,
    InOrderWriter,
    PipelinedWriter,
    PostgresCopyWriter,
    TickWriter,
    checkpoint_upsert_statement,
    copy_statement,
    postgres_conninfo,
    staging_statements,
)


def writer_for_database() -> TickWriter:
    """Return the fastest in-process writer the default database supports."""
    if connection.vendor == "postgresql":
        return PostgresCopyWriter()
    return BulkInsertWriter()


def pipelined_writer_for_database() -> PipelinedWriter:
    """Return the recorder's writer: COPY in a writer process on PostgreSQL (unless
    RECORDER_WRITER_PROCESS is off), else the in-process writer, one batch at a time."""
    if connection.vendor == "postgresql" and settings.RECORDER_WRITER_PROCESS:
        return CopyProcessWriter(
            conninfo=postgres_conninfo(),
            copy_sql=copy_statement(),
            types=COPY_TYPES,
            upsert_sql=checkpoint_upsert_statement(),
            staging=staging_statements(),
        )
    return InOrderWriter(writer_for_database())
