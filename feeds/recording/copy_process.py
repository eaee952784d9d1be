"""The recorder's PostgreSQL writer in its own process (feeds.recording.copy_worker), pipelined.

In the feed's process a writer thread shares the GIL with the event loop reading the
sockets; measured on 2 cores, PostgreSQL then sat at 12-30 % of a core while frames
arrived and the ticks were committed long after they were read. Here the loop only
encodes each batch (msgpack) and writes it to a pipe; the worker COPYs batch after
batch while the next ones are on their way.

`submit` never waits: batches go out in order and each future resolves when the worker
has committed (or refused) that batch, to the rows the database refused in it. If the worker dies, every outstanding future
fails and the next `submit` starts a new worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from feeds.recording.copy_worker import CONNINFO_ENV, SKIPPED, frame, wide_int
from feeds.recording.tick_refusals import Refusal
from feeds.recording.tick_rows import CheckpointRow, TickRow, WriteResult, WriteSkipped

log = logging.getLogger(__name__)

_PROJECT_ROOT = Path(__file__).resolve().parents[2]


class WriterProcessError(RuntimeError):
    """The worker refused a batch or went away before answering."""


class CopyProcessWriter:
    """Pipelined tick writer backed by one `feeds.recording.copy_worker` process."""

    def __init__(
        self, *, conninfo: str, copy_sql: str, types: Sequence[str], upsert_sql: str, staging: Sequence[str]
    ) -> None:
        self._conninfo = conninfo
        self._hello = msgspec.msgpack.encode(
            {"copy": copy_sql, "types": list(types), "upsert": upsert_sql, "staging": list(staging)}
        )
        self._encode = msgspec.msgpack.Encoder().encode
        self._decode = msgspec.msgpack.Decoder().decode
        self._process: asyncio.subprocess.Process | None = None
        self._outgoing: deque[bytes] = deque()
        self._waiting: dict[int, asyncio.Future[Sequence[Refusal] | None]] = {}
        self._next_id = 0
        self._wake = asyncio.Event()
        self._io: asyncio.Task[None] | None = None
        self.starts = 0  # worker processes started so far

    def submit(
        self,
        rows: Sequence[TickRow],
        checkpoints: Sequence[CheckpointRow],
    ) -> asyncio.Future[Sequence[Refusal] | None]:
        """Queue one batch; the future resolves once it is committed, to the refused rows."""
        self._next_id += 1
        future: asyncio.Future[Sequence[Refusal] | None] = asyncio.get_running_loop().create_future()
        self._waiting[self._next_id] = future
        self._outgoing.append(
            frame(self._encode_batch(["batch", self._next_id, rows, [_checkpoint(c) for c in checkpoints]]))
        )
        self._kick()
        return future

    def _encode_batch(self, message: list[Any]) -> bytes:
        try:
            return self._encode(message)
        except OverflowError:
            # A value beyond 64 bits (rare: a price or volume past 9.2e6 whole units):
            # only this batch pays for the walk that wraps the wide ints.
            return self._encode(_widen(message))

    def reset(self) -> None:
        """After a failure has been handled: the worker accepts batches again."""
        self._outgoing.append(frame(self._encode(["reset"])))
        self._kick()

    async def close(self, *, timeout_s: float = 30.0) -> None:
        """Let the worker finish what it was sent (up to `timeout_s`), then stop it."""
        if self._io is not None:
            deadline = asyncio.get_running_loop().time() + timeout_s
            while self._waiting and not self._io.done() and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.01)
            self._io.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._io
            self._io = None
        self._fail_waiting("tick writer closed before the batch was committed")
        await self._stop_process()

    def _kick(self) -> None:
        self._wake.set()
        if self._io is None or self._io.done():
            self._io = asyncio.create_task(self._run(), name="recorder:copy-process")

    async def _run(self) -> None:
        try:
            await self._serve()
        except Exception as exc:  # a dead worker: fail what it held; the next submit starts another
            log.warning("recorder: tick writer process failed: %s", exc)
            self._fail_waiting(f"tick writer process failed: {exc}")
            await self._stop_process()

    async def _serve(self) -> None:
        process = await self._start_process()
        reader = asyncio.create_task(self._read_replies(process))
        try:
            assert process.stdin is not None
            while True:
                # Cleared before the queue is emptied: a submit during the drain below
                # sets it again, so no batch waits for the one after it.
                self._wake.clear()
                while self._outgoing:
                    process.stdin.write(self._outgoing.popleft())
                await process.stdin.drain()
                if reader.done():
                    reader.result()  # raises why the worker stopped answering
                if self._outgoing:
                    continue
                waiter = asyncio.ensure_future(self._wake.wait())
                await asyncio.wait({waiter, reader}, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                if reader.done() and not self._outgoing:
                    reader.result()
        finally:
            reader.cancel()

    async def _read_replies(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while True:
            try:
                head = await process.stdout.readexactly(4)
                body = await process.stdout.readexactly(int.from_bytes(head, "big"))
            except asyncio.IncompleteReadError:
                code = await process.wait()
                raise WriterProcessError(f"exited with code {code}") from None
            batch_id, error, refused, duplicates = self._decode(body)
            future = self._waiting.pop(batch_id, None)
            if future is None or future.done():
                continue
            if error is None:
                future.set_result(WriteResult([(index, reason) for index, reason in refused], duplicates))
            elif error == SKIPPED:
                future.set_exception(WriteSkipped(error))
            else:
                future.set_exception(WriterProcessError(error))

    async def _start_process(self) -> asyncio.subprocess.Process:
        if self._process is None or self._process.returncode is not None:
            self.starts += 1
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "feeds.recording.copy_worker",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                cwd=_PROJECT_ROOT,
                env={**os.environ, CONNINFO_ENV: self._conninfo},
            )
            assert self._process.stdin is not None
            self._process.stdin.write(frame(self._hello))
            log.info("recorder: tick writer process %d started", self._process.pid)
        return self._process

    async def _stop_process(self) -> None:
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        assert process.stdin is not None
        process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), timeout=10)
        except TimeoutError:
            process.kill()
            await process.wait()

    def _fail_waiting(self, reason: str) -> None:
        # Batches not yet sent belong to the failed futures too; the recorder resubmits them.
        self._outgoing.clear()
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(WriterProcessError(reason))


def _widen(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_widen(item) for item in value]
    if type(value) is int and not -(2**63) <= value < 2**63:
        return wide_int(value)
    return value


def _checkpoint(c: CheckpointRow) -> tuple[Any, ...]:
    return (c.feed_id, c.venue_symbol, c.trade_id, c.ts_event, c.price, c.volume, c.side)
