#!/usr/bin/env python
"""Streamed pretraining input: resume time at far positions (saved input state vs replay) and rows/s.

Builds, once, a synthetic corpus of realistic size in TFRecord shards under
`--dir` (default: 12 languages, 3 million short documents, sizes 1:2:...:12
so that n^alpha sampling matters, plus 6 `{lg}-en` parallel sets of 100,000
pairs), registers one seqio task per language (pair) over it, and measures
`SeqioPairSource` (batch `--batch_size`, the VECO segment length by default):

* set-up + first batch, and rows/s over `--batches` consecutive batches;
* resume at each of `--positions`:
  - saved state (this version): a fresh source restores the input state of
    batch p (`restore_input_state`) and builds batch p;
  - replay (the previous version, still the fallback for checkpoints without
    input state): a fresh source replays the language draws of batches
    0..p-1, then re-opens every stream with `dataset.skip(cursor)`. It is run
    to the end when it fits in `--replay_limit` seconds; otherwise both of its
    parts (draw replay, skip reading) are timed on a prefix and extrapolated
    linearly (both are linear in p), marked `~`.

The input state at p is what a run that trained to p would have saved, built
without running p batches: the cursors come from the draws (as the replay
computes them) and each stream is read to its cursor modulo its length (the
corpus has no empty documents and one host, so the stream length is exact).
It differs from a real run's state only in the repeat epoch count inside the
tf.data checkpoint, which does not affect the data. At the positions where
the replay runs to the end, the two methods' batches are compared (must be
bit-identical).

    python benchmarks/pretraining_input_speed.py
    python benchmarks/pretraining_input_speed.py --positions 1000,100000 --batches 20
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

from benchmarks import machine  # noqa: E402

LANGUAGES = ("ar", "de", "el", "en", "es", "fr", "hi", "ja", "ru", "sw", "th", "zh")
PAIRS = ("ar-en", "de-en", "es-en", "fr-en", "hi-en", "zh-en")
ALPHABETS = {  # letters the pseudo-words of each language are made of
    "ar": "ابتثجحخدذرزسشصضطظعغفقكلمنهوي", "el": "αβγδεζηθικλμνξοπρστυφχψω", "hi": "कखगघचछजझटठडढणतथदधनपफबभमयरलवशसह",
    "ja": "あいうえおかきくけこさしすせそたちつてとなにぬねのアイウエオカキクケコ", "ru": "абвгдежзийклмнопрстуфхцчшщыэюя",
    "th": "กขคงจฉชซญดตถทธนบปผพฟภมยรลวศสหอฮ", "zh": "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年",
}
LATIN = "abcdefghijklmnopqrstuvwxyzéèàü"


def _words(lang: str, rng, n: int = 4000) -> list[str]:
  letters = list(ALPHABETS.get(lang, LATIN))
  return ["".join(rng.choice(letters, rng.integers(2, 9))) for _ in range(n)]


def _sentence(words, rng) -> str:
  return " ".join(words[i] for i in rng.integers(0, len(words), rng.integers(6, 16)))


def _write_corpus(directory: str, docs: int, pairs: int, shards: int) -> dict:
  """TFRecord shards of tf.train.Examples; returns {key: (file pattern, examples)}; reused when present."""
  import tensorflow as tf
  marker = os.path.join(directory, "corpus.json")
  spec = {"docs": docs, "pairs": pairs, "shards": shards, "languages": LANGUAGES, "pairs_of": PAIRS}
  if os.path.exists(marker):
    stored = json.load(open(marker))
    if stored["spec"] == json.loads(json.dumps(spec)):
      return {k: tuple(v) for k, v in stored["streams"].items()}
  os.makedirs(directory, exist_ok=True)
  weights = np.arange(1, len(LANGUAGES) + 1)
  sizes = {lg: int(docs * w / weights.sum()) for lg, w in zip(LANGUAGES, weights)}
  sizes.update({p: pairs for p in PAIRS})
  streams = {}
  t0 = time.perf_counter()
  for key, n in sizes.items():
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    if "-" in key:
      src_words, tgt_words = _words(key.split("-")[0], rng), _words("en", rng)
    else:
      words = _words(key, rng)
    writers = [tf.io.TFRecordWriter(os.path.join(directory, f"{key}.tfrecord-{s:05d}-of-{shards:05d}"))
               for s in range(shards)]
    for i in range(n):
      if "-" in key:
        feats = {"source": _sentence(src_words, rng), "target": _sentence(tgt_words, rng)}
      else:
        feats = {"text": "\n".join(_sentence(words, rng) for _ in range(rng.integers(2, 5)))}
      ex = tf.train.Example(features=tf.train.Features(feature={
          k: tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode("utf-8")])) for k, v in feats.items()}))
      writers[i * shards // n].write(ex.SerializeToString())  # contiguous blocks: shard order = document order
    for w in writers:
      w.close()
    streams[key] = (os.path.join(directory, f"{key}.tfrecord-*"), n)
    print(f"  wrote {key}: {n:,} examples ({time.perf_counter() - t0:.0f} s)", flush=True)
  with open(marker, "w") as f:
    json.dump({"spec": spec, "streams": streams}, f)
  return streams


def _register(streams: dict) -> tuple[dict, dict]:
  import seqio
  import tensorflow as tf

  import xtreme_tasks.pretraining as pt
  mono, para = {}, {}
  for key, (pattern, _) in streams.items():
    bilingual = "-" in key
    name = f"bench_{'parallel' if bilingual else 'text'}_{key.replace('-', '_')}"
    features = ("source", "target") if bilingual else ("text",)
    source = seqio.TFExampleDataSource(
        {"train": sorted(tf.io.gfile.glob(pattern))},
        feature_description={k: tf.io.FixedLenFeature([], tf.string) for k in features})
    seqio.TaskRegistry.remove(name)
    seqio.TaskRegistry.add(name, source=source, output_features=pt.PAIR_FEATURES if bilingual else pt.TEXT_FEATURES,
                           preprocessors=[], metric_fns=[])
    (para if bilingual else mono)[key] = name
  return mono, para


def _state_at(source, position: int, lengths: dict) -> dict:
  """The input state before batch `position`, each stream read to its cursor modulo its length (module docstring)."""
  from xtreme_jax.data.pretraining import stream_state as ss
  cursors = source.cursors(position)
  streams = {}
  for key, cursor in cursors.items():
    bilingual = "-" in key
    task = (source.bi_tasks if bilingual else source.mono_tasks)[key]
    stream = ss.Stream(task.name, source._dataset(task, bilingual, 0, 0, 1, ss.READ_CHUNK), 0,
                       source._prepare_bi if bilingual else source._prepare_mono, source.max_lookahead)
    ahead = cursor % lengths[key]
    while ahead >= ss.READ_CHUNK:  # whole chunks: fetched and dropped, never tokenized
      next(stream.iterator)
      ahead -= ss.READ_CHUNK
    stream._read_chunk()
    for _ in range(ahead):
      stream.pending.popleft()
    stream.cursor = cursor
    streams[key] = {**stream.state(), "chunk": ss.READ_CHUNK}
  return json.loads(json.dumps({"format": ss.STATE_FORMAT, "position": position, "host": [0, 1],
                                "data": source.data_fingerprint(1), "cursors": cursors, "streams": streams}))


def _replay(make, position: int, limit: float) -> tuple[float, bool, dict | None]:
  """(seconds, extrapolated?, batch or None) of the replay method at `position`."""
  src = make()
  src.example_counts  # set-up (task lookup, sizes) is not part of the resume
  # Part 1, the draw replay: timed on a prefix, extrapolated linearly beyond the limit.
  t0 = time.perf_counter()
  done, step = 0, 1000
  while done < position and time.perf_counter() - t0 < limit / 2:
    n = min(step, position - done)
    src.cursors(done + n, start=done)
    done += n
  draws = (time.perf_counter() - t0) * position / done
  # Part 2, skip reading: every stream re-opened at its cursor; timed on what fits in the limit.
  cursors = src.cursors(position) if done == position else {
      k: int(v * position / done) for k, v in src.cursors(done).items()}
  total = sum(cursors.values())
  t0 = time.perf_counter()
  read = 0
  for key, cursor in cursors.items():
    budget = limit / 2 - (time.perf_counter() - t0)
    if budget <= 0:
      break
    bilingual = "-" in key
    task = (src.bi_tasks if bilingual else src.mono_tasks)[key]
    skip = cursor if done == position else min(cursor, int(2e5 * budget))
    next(iter(src._dataset(task, bilingual, skip, 0, 1, 1)))
    read += skip
  skipping = (time.perf_counter() - t0) * total / max(read, 1)
  if done == position and read == total:  # it fitted: run the real thing for the batch itself
    fresh = make()
    fresh.example_counts
    t0 = time.perf_counter()
    batch = fresh.batch(position)
    seconds = time.perf_counter() - t0
    fresh.close()
    return seconds, False, batch
  return draws + skipping, True, None


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--dir", default="/tmp/xtreme_jax_input_benchmark")
  ap.add_argument("--docs", type=int, default=3_000_000, help="monolingual documents over the 12 languages")
  ap.add_argument("--pairs", type=int, default=100_000, help="pairs per parallel set")
  ap.add_argument("--shards", type=int, default=8)
  ap.add_argument("--batch_size", type=int, default=256)
  ap.add_argument("--segment_len", type=int, default=254)
  ap.add_argument("--batches", type=int, default=40, help="consecutive batches timed for rows/s")
  ap.add_argument("--positions", default="1000,100000,1000000")
  ap.add_argument("--replay_limit", type=float, default=60.0, help="seconds the replay method may run per position")
  args = ap.parse_args()

  from xtreme_jax.data import paths
  from xtreme_jax.data.pretraining.pretraining_streams import SeqioPairSource

  print(f"# {machine.cpu_count()} CPUs, load {machine.loadavg()}; tensorflow {machine.version('tensorflow')}, "
        f"seqio {machine.version('seqio')}")
  t0 = time.perf_counter()
  streams = _write_corpus(args.dir, args.docs, args.pairs, args.shards)
  lengths = {k: n for k, (_, n) in streams.items()}
  print(f"# corpus: {len(LANGUAGES)} languages, {sum(n for k, n in lengths.items() if '-' not in k):,} documents, "
        f"{len(PAIRS)} pair sets of {args.pairs:,}, {args.shards} shards each, in {args.dir} "
        f"(ready in {time.perf_counter() - t0:.0f} s)")
  mono, para = _register(streams)
  make = lambda: SeqioPairSource(vocabulary=paths.sample_vocab(), monolingual_tasks=mono,  # noqa: E731
                                 parallel_tasks=para, counts=lengths, segment_len=args.segment_len,
                                 batch_size=args.batch_size, task_modules=())
  print(f"# batch {args.batch_size} x segment {args.segment_len}; sample sentencepiece vocabulary")

  t0 = time.perf_counter()
  src = make()
  src.batch(0)
  setup = time.perf_counter() - t0
  t0 = time.perf_counter()
  for p in range(1, args.batches + 1):
    src.batch(p)
  run = time.perf_counter() - t0
  src.close()
  print(f"set-up + first batch: {setup:.2f} s; running: {args.batches * args.batch_size / run:,.0f} rows/s "
        f"({args.batches / run:.2f} batches/s over {args.batches} batches)")

  print(f"{'resume at batch':>16}{'saved state s':>15}{'replay s':>12}{'ratio':>9}  identical")
  for position in (int(p) for p in args.positions.split(",")):
    state = _state_at(make(), position, lengths)
    fresh = make()
    fresh.example_counts
    t0 = time.perf_counter()
    fresh.restore_input_state(state, position)
    batch = fresh.batch(position)
    ours = time.perf_counter() - t0
    fresh.close()
    replay, extrapolated, reference = _replay(make, position, args.replay_limit)
    same = "-" if reference is None else str(all(np.array_equal(batch[k], reference[k]) for k in batch))
    mark = "~" if extrapolated else ""
    print(f"{position:>16,}{ours:>15.2f}{mark + f'{replay:.1f}':>12}{replay / ours:>9.0f}  {same}", flush=True)
  print("~: extrapolated from a prefix of the replay (linear in the position)")


if __name__ == "__main__":
  main()
