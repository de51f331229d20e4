"""WMT14 En->De / En->Fr from TFDS `wmt14_translate` on mocked builders (`tfds.testing.mock_data`, no network)."""

import pytest

from xtreme_jax import errors
from xtreme_jax.data.translation import wmt14

TIER = "unit"  # conftest.py: this file's tier

tf = pytest.importorskip("tensorflow")
tfds = pytest.importorskip("tensorflow_datasets")

LOADS = []  # (builder, config, split) of every mocked load


def _as_dataset(self, split, decoders=None, read_config=None, shuffle_files=False):
  """Three pairs whose text names their language and position: `de 0` is the German side of `en 0`."""
  del decoders, read_config, shuffle_files
  LOADS.append((self.name, self.builder_config.name, str(split)))
  return tf.data.Dataset.from_tensor_slices({lg: [f"{lg} {i}" for i in range(3)]
                                            for lg in self.builder_config.language_pair})


@pytest.fixture
def mocked():
  LOADS.clear()
  with tfds.testing.mock_data(policy=tfds.testing.MockPolicy.USE_CODE, as_dataset_fn=_as_dataset):
    yield LOADS


def test_records_are_english_to_german_or_french(mocked):
  assert list(wmt14.records("en_de", "test")) == [
      {"id": f"wmt14_en_de-test-{i}", "source": f"en {i}", "target": f"de {i}"} for i in range(3)]
  assert [(r["source"], r["target"]) for r in wmt14.records("en_fr", "dev")] == [(f"en {i}", f"fr {i}")
                                                                                for i in range(3)]
  # validation is newstest2013 and test newstest2014 of the de-en / fr-en configs (TFDS's subsets).
  assert mocked == [("wmt14_translate", "de-en", "test"), ("wmt14_translate", "fr-en", "validation")]
  assert wmt14.TEST_SETS == {"validation": "newstest2013", "test": "newstest2014"}


def test_unknown_names_and_missing_data(tmp_path):
  with pytest.raises(errors.ConfigError, match="unknown WMT14 direction 'de_en'; valid: en_de, en_fr"):
    wmt14.records("de_en", "test")
  with pytest.raises(errors.ConfigError, match="WMT14 has no split 'newstest2014'; valid: train, validation, test"):
    wmt14.records("en_de", "newstest2014")
  with pytest.raises(errors.MissingInputError, match=rf"'wmt14_translate/fr-en' is not prepared in {tmp_path}; "
                                                     rf"nothing is downloaded here.*`tfds build wmt14_translate/fr-en "
                                                     rf"--data_dir {tmp_path}`"):
    wmt14.records("en_fr", "train", str(tmp_path))


def test_parallel_text_files_stand_in_for_tfds(tmp_path):
  """`text_dir`: `<split>.<config>.<lang>` where present, else `<config>.<lang>` for every split; both sides must
  have as many lines."""
  (tmp_path / "de-en.en").write_text("a house\nthe river\n", encoding="utf-8")
  (tmp_path / "de-en.de").write_text("ein Haus\nder Fluss\n", encoding="utf-8")
  (tmp_path / "test.de-en.en").write_text("the mill\n", encoding="utf-8")
  (tmp_path / "test.de-en.de").write_text("die Mühle\n", encoding="utf-8")
  train = list(wmt14.records("en_de", "train", text_dir=str(tmp_path)))
  assert [(r["source"], r["target"]) for r in train] == [("a house", "ein Haus"), ("the river", "der Fluss")]
  assert [r["target"] for r in wmt14.records("en_de", "test", text_dir=str(tmp_path))] == ["die Mühle"]
  assert [r["target"] for r in wmt14.records("en_de", "dev", text_dir=str(tmp_path))] == ["ein Haus", "der Fluss"]
  with pytest.raises(errors.MissingInputError, match=r"no train\.fr-en\.\{en,fr\} or fr-en\.\{en,fr\} files"):
    wmt14.text_files("en_fr", "train", str(tmp_path))
  (tmp_path / "test.de-en.de").write_text("die Mühle\nzu viel\n", encoding="utf-8")
  with pytest.raises(errors.DataError, match=r"test\.de-en\.de: 2 lines, but .*test\.de-en\.en has 1; expected "):
    wmt14.text_files("en_de", "test", str(tmp_path))
