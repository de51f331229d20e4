"""MLM masking, deterministic batch sources, per-host slices, TSV reader errors."""

import jax
import numpy as np
import pytest

from conftest import TINY
from xtreme_jax import errors
from xtreme_jax.data.features import masking
from xtreme_jax.data import paths
from xtreme_jax.data.features.classification_source import TsvClassificationSource, truncate_pair
from xtreme_jax.data.features.mlm_source import MlmTextSource
from xtreme_jax.models.mlm import MlmModel

TIER = "integration"  # conftest.py: this file's tier

SPECIAL = [0, 1, 2, 3, 99]


def test_masking_rates_and_specials_never_masked():
  rng = np.random.default_rng(0)
  replacements = masking.regular_ids(100, SPECIAL)
  ids = np.concatenate([[0], np.arange(10, 90), [2], [1] * 18]).astype(np.int32)  # 80 maskable tokens
  counts = {"mask": 0, "random": 0, "kept": 0}
  for _ in range(3000):
    out = masking.mask_tokens(ids, rng, mask_prob=0.15, mask_id=99, special_ids=SPECIAL,
                              replacement_ids=replacements, max_predictions=20)
    n = int(out["masked_weights"].sum())
    assert n == 12  # round(0.15 * 80)
    pos = out["masked_positions"][:n]
    assert not np.isin(ids[pos], SPECIAL).any()
    np.testing.assert_array_equal(out["masked_ids"][:n], ids[pos])
    changed = np.flatnonzero(out["input_ids"] != ids)
    assert set(changed) <= set(pos)  # only picked positions change
    new = out["input_ids"][pos]
    counts["mask"] += int((new == 99).sum())
    counts["kept"] += int((new == ids[pos]).sum())
    rand = new[(new != 99) & (new != ids[pos])]
    counts["random"] += len(rand)
    assert not np.isin(rand, SPECIAL).any()
  total = sum(counts.values())
  # 80/10/10 (a random draw equal to the original counts as kept: 1/95 of 10%).
  assert counts["mask"] / total == pytest.approx(0.8, abs=0.01)
  assert counts["random"] / total == pytest.approx(0.1 * 94 / 95, abs=0.01)
  assert counts["kept"] / total == pytest.approx(0.1 + 0.1 / 95, abs=0.01)


def sample_source(**kw):
  args = dict(files=("pretrain/*.txt",), vocabulary="sample_spm.model", data_dir=paths.sample_dir(),
              seq_len=32, batch_size=8)
  args.update(kw)
  return MlmTextSource(**args)


def test_mlm_source_is_deterministic_and_host_sliced():
  source = sample_source()
  a, b = source.batch(5), sample_source().batch(5)
  for k in a:
    np.testing.assert_array_equal(a[k], b[k])
  assert not np.array_equal(source.batch(5)["input_ids"], source.batch(6)["input_ids"])
  halves = [source.batch(5, host_index=h, host_count=2) for h in range(2)]
  for k in a:
    np.testing.assert_array_equal(np.concatenate([h[k] for h in halves]), a[k])
  v = source.vocab
  assert (a["input_ids"][:, 0] == v.cls_id).all()
  assert a["input_ids"].shape == (8, 32) and a["masked_positions"].shape == (8, source.max_predictions)


def test_mlm_source_train_eval_split_and_model_shapes():
  train, held = sample_source(holdout_every=5), sample_source(holdout_every=5, split="eval")
  everything = sample_source()
  assert train.num_examples + held.num_examples == everything.num_examples
  batches = list(held.eval_batches())
  assert sum(int((b["masked_weights"].sum(1) > 0).sum()) for b in batches) == held.num_examples
  model = MlmModel(TINY.replace(vocab_size=1024, max_positions=32))
  logits = model.network(True).apply({"params": model.init(jax.random.PRNGKey(0), batches[0])}, batches[0])
  assert logits.shape == (8, held.max_predictions, 1024)


def test_mlm_source_errors(tmp_path):
  with pytest.raises(FileNotFoundError, match="nothing_here"):
    _ = sample_source(files=("nothing_here/*.txt",)).chunks
  (tmp_path / "empty.txt").write_text("\n\n")
  with pytest.raises(errors.DataError, match=r"empty\.txt holds no text; expected one sentence"):
    _ = sample_source(files=(str(tmp_path / "empty.txt"),)).chunks
  (tmp_path / "de.txt").write_text("Der Fluss.\n")  # a language whose file is empty is not dropped without a word
  with pytest.raises(errors.DataError, match=r"empty\.txt holds no text"):
    _ = sample_source(files=(str(tmp_path / "*.txt"),)).chunks
  (tmp_path / "latin1.txt").write_bytes(b"gut\n\xfcber\n")
  with pytest.raises(errors.DataError, match=r"latin1\.txt:2 \(byte 4\): not UTF-8 \(byte 0xfc"):
    _ = sample_source(files=(str(tmp_path / "latin1.txt"),)).chunks


def test_paths_under_data_dir_except_absolute_paths_and_urls():
  assert paths.resolve("/data", "vocab/spm.model") == "/data/vocab/spm.model"
  assert paths.resolve("gs://bucket/data", "spm.model") == "gs://bucket/data/spm.model"
  assert paths.resolve("/data", "/abs/spm.model") == "/abs/spm.model"
  assert paths.resolve("/data", "gs://bucket/spm.model") == "gs://bucket/spm.model"
  assert paths.resolve(None, "spm.model") == "spm.model"


def test_truncate_pair_longest_first():
  assert truncate_pair([1, 2, 3, 4, 5], [6, 7], 5) == ([1, 2, 3], [6, 7])
  assert truncate_pair([1, 2], [3, 4, 5], 3) == ([1], [3, 4])


def test_tsv_source_reads_literal_quotes_and_names_bad_rows(tmp_path):
  good = tmp_path / "train.tsv"
  good.write_bytes('He said "hi"\tNo ""quote""\tentailment\r\nA\tB\tneutral\r\n'.encode())
  source = TsvClassificationSource(str(good), f"{paths.sample_dir()}/sample_spm.model",
                                   ("contradiction", "entailment", "neutral"), seq_len=24, batch_size=2)
  assert source.rows[0] == (['He said "hi"', 'No ""quote""'], 1)
  ex = source.example(0, None)
  assert ex["input_ids"][0] == source.vocab.cls_id and int(ex["labels"]) == 1
  bad = tmp_path / "bad.tsv"
  bad.write_text("A\tB\tentailment\nonly one column\n")
  with pytest.raises(ValueError, match=r"bad.tsv:2: expected at least 3 tab-separated columns, got 1"):
    _ = TsvClassificationSource(str(bad), "x", ("entailment",)).rows
  bad.write_text("A\tB\tmaybe\n")
  with pytest.raises(ValueError, match=r"bad.tsv:1: label 'maybe' is not one of"):
    _ = TsvClassificationSource(str(bad), "x", ("entailment",)).rows
