"""Input ahead of the device: a bounded background producer, and outputs fetched behind dispatch.

`Prefetcher(items, depth)` runs an iterator (building numpy batches and
placing them on the devices) in a daemon thread, at most `depth` items ahead
of its consumer, so the host builds batch p + 1 while the device runs step p.
The items and their order are those of the iterator: prefetching changes
when a batch is built, never what it holds. An exception in the producer is
raised in the consumer, unchanged; `depth=0` runs the iterator inline.

`pipelined(fn, inputs, lag)` calls `fn` (a jitted step: it returns at once)
on each input and fetches each output to the host `lag` calls later, so
fetching output i never stalls the dispatch of input i + 1.
"""

from __future__ import annotations

import collections
import queue
import threading
from typing import Any, Callable, Iterable, Iterator

import jax

_DONE = object()


class Prefetcher:
  """The items of `items`, produced by a background thread at most `depth` ahead (a context manager)."""

  def __init__(self, items: Iterable, depth: int = 2):
    self._items = iter(items)
    self._depth = depth
    self._queue: queue.Queue = queue.Queue(maxsize=max(depth, 1))
    self._stop = threading.Event()
    self._thread = None
    if depth > 0:
      self._thread = threading.Thread(target=self._produce, name="xtreme-jax-prefetch", daemon=True)
      self._thread.start()

  def _produce(self) -> None:
    try:
      for item in self._items:
        if not self._put((True, item)):
          return
    except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised there
      self._put((False, e))
      return
    self._put((True, _DONE))

  def _put(self, entry) -> bool:
    """Queue `entry` unless the consumer closed; False once it did."""
    while not self._stop.is_set():
      try:
        self._queue.put(entry, timeout=0.1)
        return True
      except queue.Full:
        continue
    return False

  def __iter__(self) -> Iterator:
    return self

  def __next__(self) -> Any:
    if self._thread is None:
      return next(self._items)
    ok, item = self._queue.get()
    if not ok:
      self.close()
      raise item
    if item is _DONE:
      self._queue.put((True, _DONE))  # later calls stop too
      raise StopIteration
    return item

  def close(self) -> None:
    """Stop the producer (it finishes the item it is building) and wait for it."""
    self._stop.set()
    if self._thread is not None and self._thread is not threading.current_thread():
      while self._thread.is_alive():
        try:
          self._queue.get(timeout=0.1)
        except queue.Empty:
          pass
      self._thread.join()

  def __enter__(self) -> "Prefetcher":
    return self

  def __exit__(self, *exc) -> None:
    self.close()


def pipelined(fn: Callable[[Any], Any], inputs: Iterable, lag: int = 2,
              fetch: Callable[[Any], Any] = jax.device_get) -> Iterator:
  """`fetch(fn(x))` for each input in order, each fetched `lag` calls after its dispatch."""
  waiting: collections.deque = collections.deque()
  for x in inputs:
    waiting.append(fn(x))
    if len(waiting) > lag:
      yield fetch(waiting.popleft())
  while waiting:
    yield fetch(waiting.popleft())
