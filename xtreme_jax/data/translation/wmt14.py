"""WMT14 translation (the VECO paper's En->De and En->Fr) from the TFDS builder `wmt14_translate`.

The TFDS configs `de-en` and `fr-en` hold both sides of each pair
(`{"de": ..., "en": ...}`); here they are read in the direction the papers
report, English to German / French (`DIRECTIONS`): `source` is the English
side, `target` the German / French one.

Splits (TFDS's, `SPLITS`): `train` (the WMT14 training corpora TFDS
assembles: Europarl v7, Common Crawl, News Commentary v9, plus the UN corpus
and Gigafren for fr-en), `validation` = newstest2013, `test` = newstest2014
(TFDS reads the `newstest2014-{de,fr}en` files of the WMT19 dev archive).
`dev` is accepted for `validation`.

`dataset(direction, split, data_dir)` gives a `tf.data.Dataset` of
`{"source", "target"}` strings (the seqio tasks, `tasks/translation.py`);
`records(...)` the same as Python dicts `{"id", "source", "target"}`, lazily
(the training sets hold millions of pairs). `data_dir` is the TFDS data dir
(None: TFDS's default, `$TFDS_DATA_DIR` or `~/tensorflow_datasets`). Nothing
is downloaded: an unprepared dataset raises `errors.MissingInputError` naming
the builder and the `tfds build` command to run on a machine with internet.
`text_dir` reads line-aligned parallel text files instead (`text_files`; the
bundled sample `sample_data/parallel`, which `wmt14_tiny` trains on).
TensorFlow (Datasets) is imported on use only.
"""

from __future__ import annotations

import os
from typing import Iterator, NamedTuple, Optional

from xtreme_jax import errors, fs, text
from xtreme_jax.data.readers.xtreme_tfds import quiet_tfds

BUILDER = "wmt14_translate"
SPLITS = ("train", "validation", "test")
SPLIT_ALIASES = {"dev": "validation"}
TEST_SETS = {"validation": "newstest2013", "test": "newstest2014"}


class Direction(NamedTuple):
  config: str  # the TFDS builder config
  source: str  # language of the inputs
  target: str  # language of the references


DIRECTIONS = {"en_de": Direction("de-en", "en", "de"), "en_fr": Direction("fr-en", "en", "fr")}


def direction(name: str) -> Direction:
  if name not in DIRECTIONS:
    raise errors.ConfigError(f"unknown WMT14 direction {name!r}; valid: {', '.join(DIRECTIONS)}")
  return DIRECTIONS[name]


def tfds_name(name: str) -> str:
  """`wmt14_translate/de-en` for `en_de`."""
  return f"{BUILDER}/{direction(name).config}"


def tfds_split(split: str) -> str:
  split = SPLIT_ALIASES.get(split, split)
  if split not in SPLITS:
    raise errors.ConfigError(f"WMT14 has no split {split!r}; valid: {', '.join(SPLITS)} (dev = validation)")
  return split


def text_files(name: str, split: str, text_dir: str) -> dict[str, str]:
  """{"source": path, "target": path}: `<text_dir>/<split>.<config>.<language>` (e.g. `test.de-en.de`) where that
  pair exists, else `<text_dir>/<config>.<language>` for every split (the bundled parallel sample: one set of
  pairs); line-aligned UTF-8 text, one sentence per line."""
  d, split = direction(name), tfds_split(split)
  for stem in (f"{split}.{d.config}", d.config):
    files = {side: os.path.join(text_dir, f"{stem}.{lang}") for side, lang in (("source", d.source),
                                                                                ("target", d.target))}
    if all(fs.isfile(path) for path in files.values()):
      break
  else:
    raise errors.MissingInputError(f"{text_dir}: no {split}.{d.config}.{{{d.source},{d.target}}} or "
                                   f"{d.config}.{{{d.source},{d.target}}} files (line-aligned parallel text)")
  counts = {side: sum(1 for _ in text.utf8_lines(path, "parallel text")) for side, path in files.items()}
  if counts["source"] != counts["target"]:
    raise errors.DataError(f"{files['target']}: {counts['target']} lines, but {files['source']} has "
                           f"{counts['source']}; expected line-aligned translations")
  return files


def dataset(name: str, split: str, data_dir: Optional[str] = None, shuffle_files: bool = False,
            text_dir: Optional[str] = None):
  """`tf.data.Dataset` of `{"source": English, "target": German / French}` (tf.string scalars), in file order
  unless `shuffle_files`; never downloads. With `text_dir`, from its parallel text files (`text_files`)."""
  if text_dir is not None:
    import tensorflow as tf
    files = text_files(name, split, text_dir)
    return tf.data.Dataset.zip({side: tf.data.TextLineDataset(path) for side, path in files.items()})
  import tensorflow_datasets as tfds  # heavy: imported on use only
  d, tf_name, split = direction(name), tfds_name(name), tfds_split(split)
  with quiet_tfds():
    try:
      ds = tfds.load(tf_name, split=split, data_dir=data_dir, download=False, shuffle_files=shuffle_files,
                     try_gcs=False)
    except AssertionError as e:  # what tfds raises for a dataset that was never prepared
      if "could not find data" not in str(e):
        raise
      where = data_dir or "the default TFDS data dir ($TFDS_DATA_DIR or ~/tensorflow_datasets)"
      dd = f" --data_dir {data_dir}" if data_dir else ""
      raise errors.MissingInputError(
          f"TFDS dataset {tf_name!r} is not prepared in {where}; nothing is downloaded here. On a machine with "
          f"internet run `tfds build {tf_name}{dd}` (`pip install 'xtreme-jax[tfds-build]'` first) and copy the "
          "resulting data dir here.") from None
  return ds.map(lambda ex: {"source": ex[d.source], "target": ex[d.target]})


def records(name: str, split: str, data_dir: Optional[str] = None, text_dir: Optional[str] = None
            ) -> Iterator[dict]:
  """`{"id": f"wmt14_{name}-{split}-{i}", "source", "target"}` (str) in file order, lazily."""
  split = tfds_split(split)
  examples = dataset(name, split, data_dir, text_dir=text_dir).as_numpy_iterator()  # a missing one raises here
  return ({"id": f"wmt14_{name}-{split}-{i}", "source": ex["source"].decode("utf-8"),
           "target": ex["target"].decode("utf-8")} for i, ex in enumerate(examples))
