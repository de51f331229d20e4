"""WMT14 En->De / En->Fr from TFDS `wmt14_translate` on mocked builders (`tfds.testing.mock_data`, no network)."""

import pytest

from xtreme_jax import errors
from xtreme_jax.data import wmt14

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
