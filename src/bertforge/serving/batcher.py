"""Dynamic batching across concurrent requests under a token budget.

Inputs from all requests wait in one queue. Once the first one arrives, the batch gathers more for at most
`max_wait_ms` or until the padded size (longest input x count) would pass `max_batch_tokens`; it is sorted by
length and run in the model's single worker thread, so the event loop keeps answering (health, 429s) while
the model computes. One worker thread: a model call uses all the cores it is given, two at once only fight.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from bertforge.serving.metrics import ServerMetrics


@dataclass
class _Item:
    payload: Any
    tokens: int
    future: asyncio.Future = field(repr=False)


class Batcher:
    """`await batcher.submit(payloads, token_counts)` -> one result per payload, from `run_batch(payloads)`."""

    def __init__(self, kind: str, run_batch: Callable[[list[Any]], Sequence[Any]], executor: ThreadPoolExecutor,
                 max_batch_tokens: int, max_wait_ms: float, metrics: ServerMetrics) -> None:
        self.kind, self.run_batch, self.executor = kind, run_batch, executor
        self.max_batch_tokens, self.max_wait = max_batch_tokens, max_wait_ms / 1000
        self.metrics = metrics
        self.queue: asyncio.Queue[_Item] = asyncio.Queue()
        self._carry: _Item | None = None
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name=f"batcher-{self.kind}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def submit(self, payloads: Sequence[Any], token_counts: Sequence[int]) -> list[Any]:
        loop = asyncio.get_running_loop()
        items = [_Item(p, max(1, n), loop.create_future()) for p, n in zip(payloads, token_counts)]
        for item in items:
            self.queue.put_nowait(item)
        self.metrics.queued_inputs.inc(len(items))
        results = await asyncio.gather(*(item.future for item in items), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return list(results)

    async def _next(self, timeout: float | None) -> _Item | None:
        if self._carry is not None:
            item, self._carry = self._carry, None
            return item
        try:
            if timeout is None:
                return await self.queue.get()
            if timeout <= 0:
                return self.queue.get_nowait()
            return await asyncio.wait_for(self.queue.get(), timeout)
        except (asyncio.TimeoutError, asyncio.QueueEmpty):
            return None

    async def _collect(self) -> list[_Item]:
        first = await self._next(None)
        batch, longest = [first], first.tokens
        deadline = time.monotonic() + self.max_wait
        while True:
            item = await self._next(deadline - time.monotonic())
            if item is None:
                return batch
            if max(longest, item.tokens) * (len(batch) + 1) > self.max_batch_tokens:
                self._carry = item  # opens the next batch
                return batch
            batch.append(item)
            longest = max(longest, item.tokens)

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._collect()
            self.metrics.queued_inputs.dec(len(batch))
            live = [item for item in batch if not item.future.done()]  # a cancelled request's inputs are skipped
            if not live:
                continue
            live.sort(key=lambda item: item.tokens, reverse=True)
            self.metrics.batch_size.labels(self.kind).observe(len(live))
            self.metrics.batch_tokens.labels(self.kind).observe(live[0].tokens * len(live))
            try:
                results = await loop.run_in_executor(self.executor, self.run_batch, [i.payload for i in live])
                if len(results) != len(live):
                    raise RuntimeError(f"the model returned {len(results)} results for {len(live)} inputs")
            except Exception as err:  # noqa: BLE001 - the requests answer 500; the loop keeps serving
                for item in live:
                    if not item.future.done():
                        item.future.set_exception(err)
                continue
            for item, result in zip(live, results):
                if not item.future.done():
                    item.future.set_result(result)
