"""The mBERT paper's scorer (evaluation/mbert_scorer.py) on the bundled sample, values by hand."""

import pytest

from xtreme_jax import errors
from xtreme_jax.data import paths
from xtreme_jax.data.mbert_data import MbertData
from xtreme_jax.evaluation import mbert_scorer

TIER = "unit"  # conftest.py: this file's tier

DATA = MbertData(data_dir=paths.sample_mbert_dir())


def _write(root, task, lg, text):
  path = root / task / f"test-{lg}.tsv"
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(text, encoding="utf-8")


def test_scores_by_hand(tmp_path):
  _write(tmp_path, "mldoc", "de", "CCAT\nECAT\nGCAT\nCCAT\n")  # the last is MCAT: 3 of 4
  # eng.testb: [The UN met in Geneva .] [Maria likes French films .]; gold entities UN/ORG Geneva/LOC, Maria/PER,
  # French/MISC. Predicted I- tags open spans once repaired; "French" missed, "films" a false MISC.
  _write(tmp_path, "ner", "en", "O\nI-ORG\nO\nO\nI-LOC\nO\n\nI-PER\nO\nO\nB-MISC\nO\n")
  _write(tmp_path, "pos", "de", "DET\nNOUN\nVERB\nPUNCT\n\nPRON\nVERB\nDET\nVERB\nPUNCT\n")  # 8 of 9 tokens
  # de test trees: [2 3 0 3] and [2 0 4 2 2]; predicted: sentence 1 right but `det` -> `det:poss` (coarse: right),
  # sentence 2 word 3 attached to 2 (wrong head), word 4 as `nsubj` (wrong label); punctuation wrong, not counted
  _write(tmp_path, "parsing", "de", "2\tdet:poss\n3\tnsubj\n0\troot\n1\tpunct\n\n2\tnsubj\n0\troot\n2\tdet\n2\tnsubj\n"
                                    "4\tpunct\n")
  result = mbert_scorer.score_submission(str(tmp_path), DATA)["tasks"]
  assert result["mldoc"]["languages"]["de"]["accuracy"] == pytest.approx(75.0)
  ner = result["ner"]["languages"]["en"]
  assert (ner["precision"], ner["recall"]) == (pytest.approx(75.0), pytest.approx(75.0))
  assert result["pos"]["languages"]["de"]["accuracy"] == pytest.approx(100 * 8 / 9)
  parse = result["parsing"]["languages"]["de"]
  assert parse["words"] == 7 and parse["uas"] == pytest.approx(100 * 6 / 7) and parse["las"] == pytest.approx(100 * 5 / 7)
  assert result["parsing"]["score"] == pytest.approx(100 * 5 / 7)
  assert result["ner"]["missing"]["de"] == "no prediction file" and result["pos"]["missing"]["sv"] == "no test file"


def test_misaligned_predictions_name_the_file_and_sentence(tmp_path):
  _write(tmp_path, "pos", "es", "DET\nNOUN\nVERB\n\nPRON\nVERB\nDET\nNOUN\nPUNCT\n")
  with pytest.raises(errors.DataError, match=r"pos/test-es.tsv: sentence 1 \(es-test-1\) has 3 predicted words; "
                                             r"the test file has 4"):
    mbert_scorer.score_submission(str(tmp_path), DATA, tasks=("pos",))
