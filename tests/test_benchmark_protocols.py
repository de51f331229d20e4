"""Each benchmark's protocol (`runs/benchmarks.py`): one per registry benchmark, its data and label checks."""

import types

import pytest

from xtreme_jax import errors
from xtreme_jax.data import paths
from xtreme_jax.data.readers.lab_data import LabData
from xtreme_jax.data.readers.mbert_data import MbertData
from xtreme_jax.data.synthetic.lab_dataset import LabLanguages, write_lab_data
from xtreme_jax.data.readers.xglue_data import XglueData
from xtreme_jax.data.readers.xtreme_data import XtremeData
from xtreme_jax.registry import BENCHMARKS
from xtreme_jax.runs.benchmarks import PROTOCOLS

TIER = "unit"  # conftest.py: this file's tier


def test_one_protocol_per_benchmark_with_its_data_object(tmp_path):
  assert set(PROTOCOLS) == set(BENCHMARKS)
  assert all(p.spec is BENCHMARKS[name] for name, p in PROTOCOLS.items())
  expected = {"xtreme": XtremeData, "xglue": XglueData, "mbert": MbertData}
  for name, protocol in PROTOCOLS.items():
    if name == "lab":
      continue
    data = protocol.data("official", paths.sample_dir())
    assert type(data) is expected[name] and data.benchmark is protocol.spec
  # The lab's languages are its folder's: its benchmark is LAB with them.
  write_lab_data(str(tmp_path), LabLanguages(languages={"base": "", "fake": "shift(1)"}, pretrain_sentences=2,
                                             train_sentences=2, dev_sentences=2, test_sentences=2))
  data = PROTOCOLS["lab"].data("official", str(tmp_path))
  assert type(data) is LabData and data.benchmark.task_names == PROTOCOLS["lab"].spec.task_names
  assert data.benchmark.task("pos").languages == {split: ("base", "fake") for split in ("train", "dev", "test")}
  assert [n for n, p in PROTOCOLS.items() if p.ordered_predictions] == ["xtreme"]  # TFDS or official order


@pytest.mark.parametrize("name,error,expected", [
    ("xtreme", errors.MissingInputError, "the test gold in the leaderboard layout"),
    ("xglue", errors.ConfigError, "the XGLUE ground truth"),
    ("mbert", errors.ConfigError, "the mBERT paper's data folder")])
def test_a_missing_labels_folder_is_one_line_naming_what_was_expected(tmp_path, name, error, expected):
  runner = types.SimpleNamespace(data=types.SimpleNamespace(source="official"))
  with pytest.raises(error, match=f"LABELS_DIR {tmp_path / 'nope'} does not exist \\(expected {expected}"):
    PROTOCOLS[name].check_labels(runner, ["xnli"], str(tmp_path / "nope"))
  PROTOCOLS[name].check_labels(runner, ["xnli"], str(tmp_path))  # an existing folder passes


def test_the_score_command_offers_every_benchmark_with_its_layouts():
  from xtreme_jax import cli
  assert f"[--benchmark {'|'.join(PROTOCOLS)}]" in cli.COMMANDS["score"].arguments
  assert all(p.predictions_layout and p.labels_layout and p.absent for p in PROTOCOLS.values())
  assert {n: p.splits for n, p in PROTOCOLS.items() if p.splits != ("test",)} == {"xglue": ("dev", "test")}
