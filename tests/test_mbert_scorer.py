"""The mBERT paper's scorer (evaluation/mbert_scorer.py) on the bundled sample, values by hand."""

import json
import shutil

import pytest

from xtreme_jax import cli, errors
from xtreme_jax.data import paths
from xtreme_jax.data.readers.mbert_data import MbertData
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


def test_a_prediction_file_that_is_not_utf8_names_file_line_and_byte(tmp_path):
  path = tmp_path / "mldoc" / "test-de.tsv"
  _write(tmp_path, "mldoc", "de", "")
  path.write_bytes(b"CCAT\n\xff\n")
  with pytest.raises(errors.DataError, match=r"mldoc/test-de\.tsv:2 \(byte 5\): not UTF-8 \(byte 0xff"):
    mbert_scorer.score_submission(str(tmp_path), DATA, tasks=("mldoc",))
  (tmp_path / "pos").mkdir()
  (tmp_path / "pos" / "test-de.tsv").write_bytes(b"DET\r\nNOUN\r\n\r\nPRON\xc3\n")
  with pytest.raises(errors.DataError, match=r"pos/test-de\.tsv:4 \(byte 17\): not UTF-8"):
    mbert_scorer.score_submission(str(tmp_path), DATA, tasks=("pos",))


def test_score_command(tmp_path, capsys):
  preds, out = tmp_path / "submission", tmp_path / "scores.json"
  _write(preds, "mldoc", "de", "CCAT\r\nECAT\r\nGCAT\r\nCCAT\r\n")  # 3 of 4, as in test_scores_by_hand
  _write(preds, "pos", "de", "DET\nNOUN\nVERB\nPUNCT\n\nPRON\nVERB\nDET\nVERB\nPUNCT\n")
  data = paths.sample_mbert_dir()
  assert cli.main(["score", "--benchmark", "mbert", "--predictions", str(preds), "--labels", data,
                   "--tasks", "pos,mldoc,ner", "--out", str(out)]) == 0
  captured = capsys.readouterr()
  assert "mldoc" in captured.out and "75.0" in captured.out and f"wrote {out}" in captured.out
  assert captured.err == "not scored: ner (no predictions folder)\n"
  written = json.loads(out.read_text())
  assert list(written["tasks"]) == ["mldoc", "pos"] and written["missing_tasks"] == ["ner"]
  assert written["tasks"]["pos"]["languages"]["de"]["accuracy"] == pytest.approx(100 * 8 / 9)
  assert written["tasks"]["mldoc"]["missing"]["en"] == "no prediction file"
  # Missing folders, nothing to score, an unknown task: one line, exit 2, nothing written.
  out.unlink()
  for predictions, labels, message in (
      (tmp_path / "nowhere", data, f"submission folder {tmp_path / 'nowhere'} does not exist"),
      (preds, tmp_path / "nowhere", f"data folder {tmp_path / 'nowhere'} does not exist"),
      (tmp_path, data, "nothing to score: no predictions folder for any of mldoc, ner, pos, parsing, "
                       "parsing_gold_pos"),
      (preds, tmp_path, "nothing to score: no prediction file of mldoc, pos has its gold")):
    assert cli.main(["score", "--benchmark", "mbert", "--predictions", str(predictions), "--labels", str(labels),
                     "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1, err
  assert cli.main(["score", "--benchmark", "mbert", "--predictions", str(preds), "--labels", data,
                   "--tasks", "nerr"]) == 2
  assert "unknown MBERT task 'nerr'" in capsys.readouterr().err
  assert not out.exists()


def test_gold_outside_the_task_labels_is_refused(tmp_path, capsys):
  data = tmp_path / "data"
  shutil.copytree(paths.sample_mbert_dir(), data)
  gold = data / "mldoc" / "german.test"
  gold.write_text(gold.read_text(encoding="utf-8").replace("GCAT\t", "maybe\t"), encoding="utf-8")
  _write(tmp_path / "submission", "mldoc", "de", "CCAT\nECAT\nGCAT\nCCAT\n")
  assert cli.main(["score", "--benchmark", "mbert", "--predictions", str(tmp_path / "submission"),
                   "--labels", str(data)]) == 2
  err = capsys.readouterr().err
  assert err == (f"error: {gold}:3: malformed row: unknown label 'maybe'; valid labels: CCAT, ECAT, GCAT, MCAT\n")
