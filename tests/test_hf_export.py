"""`xtreme-jax export-hf`: fine-tuned runs -> transformers folders with the same logits, and what is refused.

Offline and CPU-only: tiny random task models are written as fine-tuning run directories, exported, loaded with
transformers' `from_pretrained` and compared on a padded batch.
"""

import json
import os

import flax.linen as nn
import jax
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from xtreme_jax import cli, errors, hf_export  # noqa: E402
from xtreme_jax.data import paths  # noqa: E402
from xtreme_jax.data.vocab.vocabularies import load_vocabulary  # noqa: E402
from xtreme_jax.models.classification import (  # noqa: E402
    ClassificationModel, MultiTaskClassificationModel, RatingRegressionModel)
from xtreme_jax.models.qa import QaModel  # noqa: E402
from xtreme_jax.models.seq2seq import Seq2SeqModel, shift_right  # noqa: E402
from xtreme_jax.models.tagging import TaggingModel  # noqa: E402
from xtreme_jax.models.veco_assembly import read_run  # noqa: E402
from xtreme_jax.networks.config import TransformerConfig  # noqa: E402
from xtreme_jax.networks.seq2seq import Seq2SeqConfig  # noqa: E402
from xtreme_jax.registry.xtreme import PANX_TAGS  # noqa: E402
from xtreme_jax.runs.train import describe  # noqa: E402
from xtreme_jax.training.checkpoints import BestParams, Checkpointer  # noqa: E402

TIER = "integration"  # conftest.py: this file's tier

transformers.logging.set_verbosity_error()

TOL = 1e-5
SHAPE = dict(vocab_size=99, hidden_size=32, num_layers=2, num_heads=4, mlp_dim=37)
BERT = TransformerConfig(**SHAPE, max_positions=24)
XLMR = TransformerConfig(**SHAPE, max_positions=20, type_vocab_size=1, pad_token_id=1, position_style="roberta",
                         layer_norm_eps=1e-5)
LABELS = ["contradiction", "entailment", "neutral"]


def random_params(model, batch, seed):
  """The model's parameters, every leaf (zero biases, unit LayerNorm scales too) perturbed."""
  params = nn.unbox(model.init(jax.random.PRNGKey(seed), batch))
  leaves, tree = jax.tree_util.tree_flatten(params)
  rng = np.random.default_rng(seed)
  return jax.tree_util.tree_unflatten(tree, [np.asarray(x) + 0.05 * rng.standard_normal(x.shape).astype(np.float32)
                                             for x in leaves])


def encoder_batch(pad, types=False):
  ids = np.array([[2, 11, 12, 13, 14, 15, 3], [2, 21, 22, 3, pad, pad, pad], [2, 31, 3, pad, pad, pad, pad]],
                 np.int32)
  mask = (ids != pad).astype(np.int32)
  token_types = (np.arange(7)[None] >= np.array([[4], [2], [1]])).astype(np.int32) * mask if types else 0 * mask
  return {"input_ids": ids, "input_mask": mask, "token_type_ids": token_types}


def write_run(run, model, params, steps=(1,), **recorded):
  """A fine-tuning run directory: run_config.json (as `runs.train` records it) and checkpoints at `steps`."""
  run.mkdir()
  (run / "run_config.json").write_text(json.dumps({"mode": "finetune", "model": describe(model), **recorded}))
  checkpointer = Checkpointer(str(run / "checkpoints"), every=1, keep=None)
  for step in steps:
    checkpointer.save(step, {"params": params, "step": np.int32(step)}, 0, force=True)
  checkpointer.close()
  return str(run)


def load(cls, out):
  model, info = getattr(transformers, cls).from_pretrained(out, output_loading_info=True, attn_implementation="eager")
  assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
  return model.eval()


def torch_inputs(batch):
  return {"input_ids": torch.tensor(batch["input_ids"], dtype=torch.long),
          "attention_mask": torch.tensor(batch["input_mask"], dtype=torch.long),
          "token_type_ids": torch.tensor(batch["token_type_ids"], dtype=torch.long)}


def export(tmp_path, name, model, params, *argv, **recorded):
  run = write_run(tmp_path / f"{name}_run", model, params, **recorded)
  out = str(tmp_path / name)
  assert cli.main(["export-hf", run, out, *argv]) == 0
  return out


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
  return tmp_path_factory.mktemp("export")


@pytest.fixture(scope="module")
def bert_vocab(tmp):
  """A cased WordPiece vocab.txt (no tokenizer_config.json: load_vocabulary reads it cased)."""
  words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "The", "river", "runs", "past", "the", "mill", ".", "##s",
           "Mill", "old"]
  path = tmp / "wordpiece" / "vocab.txt"
  path.parent.mkdir()
  path.write_text("\n".join(words) + "\n")
  return str(path)


# ------------------------------------------------------------------- parity


def test_bert_sequence_classification(tmp, bert_vocab, capsys):
  model = ClassificationModel(BERT, 3, "pooler")
  batch = encoder_batch(0, types=True)
  params = random_params(model, batch, 0)
  out = export(tmp, "bert_cls", model, params,
               train_data={"class": "TsvClassificationSource", "vocabulary": "vocab.txt",
                           "data_dir": os.path.dirname(bert_vocab), "labels": LABELS})
  printed = capsys.readouterr().out
  assert printed.startswith(f"wrote {out} as BertForSequenceClassification (step 1, ")
  assert "tokenizer tokenizer_config.json, vocab.txt from " in printed
  hf_model = load("AutoModelForSequenceClassification", out)
  assert type(hf_model).__name__ == "BertForSequenceClassification" and hf_model.config.id2label[2] == "neutral"
  with torch.no_grad():
    theirs = hf_model(**torch_inputs(batch)).logits.numpy()
  np.testing.assert_allclose(np.asarray(model.predict_batch(params, batch)), theirs, atol=TOL, rtol=0)
  # the tokenizer tokenizes as the run did (cased, although BertTokenizer defaults to lower case)
  text = "The old Mill runs past the mills."
  ours = load_vocabulary(bert_vocab)
  assert transformers.AutoTokenizer.from_pretrained(out)(text)["input_ids"] == list(ours.build_inputs(
      ours.encode(text))[0])


@pytest.mark.parametrize("head", ["roberta", "pooler"])
def test_xlmr_sequence_classification_and_mismatched_heads(tmp, head):
  model = ClassificationModel(XLMR, 3, head)
  batch = encoder_batch(1)
  params = random_params(model, batch, 1)
  if head == "pooler":  # BERT's pooled-output head on an XLM-R encoder: XLMRoberta's class has RoBERTa's head
    with pytest.raises(errors.ConfigError, match=r"head='pooler' does not map: an encoder with XLM-R-style positions "
                                                 r"\(position_style='roberta'\) exports as "
                                                 "XLMRobertaForSequenceClassification, which has RoBERTa's"):
      hf_export.convert(describe(model), params)
    with pytest.raises(errors.ConfigError, match="head='roberta' does not map: an encoder with BERT-style"):
      hf_export.convert(describe(ClassificationModel(BERT, 3, "roberta")), params)
    return
  out = str(tmp / "xlmr_cls")
  hf_export.save(out, hf_export.convert(describe(model), params))
  with torch.no_grad():
    theirs = load("XLMRobertaForSequenceClassification", out)(**torch_inputs(batch)).logits.numpy()
  np.testing.assert_allclose(np.asarray(model.predict_batch(params, batch)), theirs, atol=TOL, rtol=0)


def test_xlmr_token_classification_with_benchmark_labels_and_tokenizer(tmp, capsys):
  """An XTREME model directory's run_config.json: labels from the task, the sample sentencepiece model."""
  model = TaggingModel(XLMR, len(PANX_TAGS))
  batch = encoder_batch(1)
  params = random_params(model, batch, 2)
  out = export(tmp, "xlmr_tag", model, params, mode="xtreme-finetune", train=[["panx", "en", "train"]],
               vocabulary=paths.portable(paths.sample_vocab()))
  assert " as XLMRobertaForTokenClassification (" in capsys.readouterr().out
  assert sorted(os.listdir(out)) == ["config.json", "model.safetensors", "sentencepiece.bpe.model",
                                     "tokenizer_config.json"]
  hf_model = load("AutoModelForTokenClassification", out)
  assert [hf_model.config.id2label[i] for i in range(len(PANX_TAGS))] == list(PANX_TAGS)
  with torch.no_grad():
    theirs = hf_model(**torch_inputs(batch)).logits.numpy()
  np.testing.assert_allclose(np.asarray(model.predict_batch(params, batch)), theirs, atol=TOL, rtol=0)
  text = "Der Zug fährt um sieben ab."
  ours = load_vocabulary(paths.sample_vocab())
  assert transformers.AutoTokenizer.from_pretrained(out)(text)["input_ids"] == list(ours.build_inputs(
      ours.encode(text))[0])


def test_question_answering_from_a_scanned_encoder_without_token_types(tmp):
  config = BERT.replace(scan_layers=True, type_vocab_size=0)
  model = QaModel(config)
  batch = encoder_batch(0)
  params = random_params(model, batch, 3)
  out = str(tmp / "qa")
  exported = hf_export.convert(describe(model), params)
  assert exported.architecture == "BertForQuestionAnswering" and exported.config["type_vocab_size"] == 1
  hf_export.save(out, exported)
  with torch.no_grad():
    theirs = load("AutoModelForQuestionAnswering", out)(**torch_inputs(batch))
  ours = model.predict_batch(params, batch)
  for key in ("start_logits", "end_logits"):
    np.testing.assert_allclose(np.asarray(ours[key]), getattr(theirs, key).numpy(), atol=TOL, rtol=0)


# ------------------------------------------------------------------- seq2seq


@pytest.mark.parametrize("config,seq2seq", [
    (XLMR, Seq2SeqConfig(decoder_layers=1)),
    (BERT.replace(layer_norm_eps=1e-5, scan_layers=True),
     Seq2SeqConfig(decoder_layers=1, tie_output=False, scale_encoder_embeddings=True, scale_decoder_embeddings=True,
                   separate_decoder_embeddings=True)),
], ids=["xlmr_tied", "bert_scanned_untied_scaled_separate"])
def test_seq2seq_as_bart(tmp, config, seq2seq):
  pad = config.pad_token_id
  model = Seq2SeqModel(config, seq2seq, eos_id=3)
  src = encoder_batch(pad)
  targets = np.array([[41, 42, 43, 3], [51, 3, pad, pad], [3, pad, pad, pad]], np.int32)
  batch = {"input_ids": src["input_ids"], "input_mask": src["input_mask"], "targets": targets,
           "target_mask": (targets != pad).astype(np.int32), "decoder_start": np.full((3,), 2, np.int32)}
  params = random_params(model, batch, 4)
  exported = hf_export.convert(describe(model), params, special={"bos_token_id": 2})
  assert exported.architecture == "BartForConditionalGeneration"
  out = str(tmp / f"bart_{seq2seq.tie_output}")
  hf_export.save(out, exported)
  hf_model = load("AutoModelForSeq2SeqLM", out)
  assert hf_model.config.decoder_start_token_id == 2 and hf_model.config.eos_token_id == 3
  decoder_inputs = np.asarray(shift_right(targets, batch["target_mask"], batch["decoder_start"], pad))
  with torch.no_grad():
    theirs = hf_model(input_ids=torch.tensor(src["input_ids"], dtype=torch.long),
                      attention_mask=torch.tensor(src["input_mask"], dtype=torch.long),
                      decoder_input_ids=torch.tensor(decoder_inputs, dtype=torch.long),
                      decoder_attention_mask=torch.tensor(batch["target_mask"], dtype=torch.long)).logits.numpy()
  ours = np.asarray(model.network(True).apply({"params": params}, batch))
  real = batch["target_mask"].astype(bool)  # a pad's own position differs (ours: the pad row), never a real token's
  np.testing.assert_allclose(ours[real], theirs[real], atol=TOL, rtol=0)


# ------------------------------------------------------------------- refusals


@pytest.mark.parametrize("model,message", [
    (Seq2SeqModel(XLMR, Seq2SeqConfig(1, scale_decoder_embeddings=True)),
     "scale_encoder_embeddings=False, scale_decoder_embeddings=True: BART's scale_embedding scales both sides' word "
     "embeddings by sqrt(d), or neither"),
    (Seq2SeqModel(BERT, Seq2SeqConfig(1)), "layer_norm_eps=1e-12: BART's LayerNorms use 1e-05"),
    (MultiTaskClassificationModel(BERT, (3, 2)),
     "a MultiTaskClassificationModel has no transformers counterpart: it has one head per task"),
    (TaggingModel(BERT.replace(num_languages=2), 5), "language embeddings (num_languages=2) have no transformers"),
])
def test_what_does_not_map_is_refused_in_one_line(model, message):
  with pytest.raises(errors.ConfigError) as e:
    hf_export.convert(describe(model), {"backbone": {}})
  assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_rating_regression_is_a_one_label_regression():
  model = RatingRegressionModel(BERT)
  exported = hf_export.convert(describe(model), random_params(model, encoder_batch(0), 7))
  assert exported.architecture == "BertForSequenceClassification"
  assert (exported.config["problem_type"], exported.config["id2label"]) == ("regression", {0: "LABEL_0"})
  assert exported.tensors["classifier.weight"].shape == (1, 32)


def test_unknown_parameters_are_refused():
  model = TaggingModel(BERT, 5)
  params = random_params(model, encoder_batch(0), 5)
  with pytest.raises(errors.ConfigError, match="parameters crf/transitions have no transformers counterpart"):
    hf_export.convert(describe(model), {**params, "crf": {"transitions": np.zeros((5, 5), np.float32)}})


def test_command_line_refusals_leave_no_output(tmp, capsys):
  model = MultiTaskClassificationModel(BERT, (3, 2))
  run = write_run(tmp / "multi_run", model, {"backbone": {"pooler": {"dense": {"bias": np.zeros(32, np.float32)}}}},
                  steps=(1, 2))
  out = tmp / "multi"
  assert cli.main(["export-hf", run, str(out)]) == 2
  assert capsys.readouterr().err == ("error: a MultiTaskClassificationModel has no transformers counterpart: it has "
                                     "one head per task, a transformers model has one\n")
  assert cli.main(["export-hf", run, str(out), "--step", "7"]) == 2
  assert capsys.readouterr().err == f"error: {run} holds no checkpoint of step 7 (steps held: checkpoints/: 1, 2)\n"
  assert not out.exists() and not [n for n in os.listdir(tmp) if n.startswith(".multi.")]


def test_steps_come_from_checkpoints_or_best(tmp):
  """The newest checkpoint by default; --step N also finds the best-on-dev parameters (`best/N`)."""
  run = write_run(tmp / "best_run", QaModel(BERT), {"backbone": {"x": np.ones(2, np.float32)}}, steps=(4,))
  best = BestParams(os.path.join(run, "best"), "f1")
  best.offer(3, {"backbone": {"x": np.zeros(2, np.float32)}}, 0.5)
  best.close()
  newest = read_run(run, str(tmp / "unused"))
  assert (newest.step, newest.where, newest.params["backbone"]["x"].tolist()) == (4, f"{run}/checkpoints/4", [1, 1])
  chosen = read_run(run, str(tmp / "unused"), step=3)
  assert (chosen.step, chosen.where, chosen.params["backbone"]["x"].tolist()) == (3, f"{run}/best/3", [0, 0])
  selected = read_run(run, str(tmp / "unused"), prefer_best=True)  # export-hf's default: what the run predicted with
  assert (selected.step, selected.where) == (3, f"{run}/best/3")


def test_a_failed_write_leaves_nothing(tmp, monkeypatch):
  model = QaModel(BERT)
  params = random_params(model, encoder_batch(0), 6)
  exported = hf_export.convert(describe(model), params)

  def broken(tensors, path, metadata=None):
    with open(path, "wb") as f:
      f.write(b"half")
    raise OSError("disk full")

  monkeypatch.setattr("safetensors.numpy.save_file", broken)
  with pytest.raises(OSError, match="disk full"):
    hf_export.save(str(tmp / "broken"), exported)
  assert not (tmp / "broken").exists() and not [n for n in os.listdir(tmp) if n.startswith(".broken.")]
