"""Export a fine-tuned run to a folder Hugging Face `transformers` loads: `xtreme-jax export-hf RUN_DIR OUT`.

What maps (logits equal transformers' within 1e-5 in float32; `tests/test_hf_export.py`):

    ClassificationModel head='pooler', BERT positions   -> BertForSequenceClassification
    ClassificationModel head='roberta', XLM-R positions -> XLMRobertaForSequenceClassification
    RatingRegressionModel                               -> the same, num_labels=1, problem_type='regression'
    TaggingModel                                        -> BertForTokenClassification / XLMRobertaForTokenClassification
    QaModel                                             -> BertForQuestionAnswering / XLMRobertaForQuestionAnswering
    Seq2SeqModel                                        -> BartForConditionalGeneration

The encoder family follows `TransformerConfig.position_style`, as `hf.config_from_hf` set it on import:
'absolute' is BERT, 'roberta' (positions from pad + 1, pads at pad) is XLM-R (the same architecture as RoBERTa).
The encoder goes through `hf`'s import table the other way (`hf.Conversion.to_hf`); a scanned encoder is
unrolled; no token-type embeddings (type_vocab_size=0) export as one zero row. The pooler is written only where
the transformers class has one (BERT's sequence classification).

The seq2seq network is post-LN with an embedding LayerNorm and no final LayerNorms, as BART: one shared word
table (tied output, or `lm_head` = `output_projection`), the same post-LN self-attention / cross-attention /
exact-GELU feed-forward layers. Each side's position table and embedding LayerNorm (one shared pair, or the
decoder's own with `separate_decoder_embeddings`) become that side's `embed_positions` / `layernorm_embedding`:
token type 0 is folded into the positions (exact: the sum before the LayerNorm is unchanged), after BART's two
unused offset rows (BART numbers a sequence's first token 2, we `pad_token_id + 1` or 0). Word embeddings scaled
by sqrt(d) on both sides are BART's `scale_embedding`. Refused: one side scaled and not the other, and a
LayerNorm epsilon other than BART's fixed 1e-5.

Refused with one line: multi-task classification (one head per task), FILTER's fusion models, VECO's shared
stack, xFNP's n-stream decoder, the biaffine parser, feature-based models, MLM pretraining runs, language
embeddings, and a classification head of the other family. The folder holds config.json (the architecture, the
label names when the run records them), model.safetensors and the run's tokenizer files (its vocabulary: a
checkpoint directory's tokenizer files, or a sentencepiece / tokenizer.json / vocab.txt file renamed to the
name transformers reads, with a tokenizer_config.json naming the tokenizer class when there is none); it is
written all at once (`hf.write_directory`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Optional

import numpy as np

from xtreme_jax import errors, fs, hf, nested
from xtreme_jax.hf import SAME, attention_rows, dense_rows, linear, ln_rows
from xtreme_jax.networks import layers
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.encoder import unstack_layer_params

# Our encoder family -> (config.json model_type, class name prefix, base-model prefix of the weight names).
_FAMILIES = {"bert": ("bert", "Bert", "bert"), "roberta": ("xlm-roberta", "XLMRoberta", "roberta")}
# Sequence classification heads: the family whose transformers class has it, and its rows (our params at the
# task network's top level, beside `backbone`).
_CLASSIFIERS = {
    "pooler": ("bert", dense_rows("classifier", "classifier")),
    "roberta": ("roberta", dense_rows("classifier.dense", "dense") + dense_rows("classifier.out_proj", "classifier")),
}
_POSITIONS = {"bert": "BERT-style positions (position_style='absolute')",
              "roberta": "XLM-R-style positions (position_style='roberta')"}
_HEADS = {"pooler": "BERT's pooled-output head (head='pooler')",
          "roberta": "RoBERTa's classification head (head='roberta')"}
_REFUSED = {  # model class -> why transformers has no counterpart
    "MultiTaskClassificationModel": "it has one head per task, a transformers model has one",
    **dict.fromkeys(("FilterClassificationModel", "FilterTaggingModel", "FilterQaModel"),
                    "FILTER's fusion layers (the pair attending across languages)"),
    "VecoModel": "VECO's stack shares each layer's self-attention and feed-forward between its encoder and "
                 "decoder paths (export-encoder gives its encoder; fine-tune it, then export that run)",
    "XfnpModel": "xFNP's n-stream predicting decoder (export-seq2seq, fine-tune, then export that run)",
    "BiaffineParserModel": "the biaffine arc / relation scorers",
    "FeatureBasedModel": "the feature-based head over frozen layer outputs",
    "MlmModel": "export-hf takes fine-tuned task models (import-hf reads MLM checkpoints, export-encoder writes "
                "a pretraining run's encoder)",
}
_BART_ATTENTION = {"query": "q_proj", "key": "k_proj", "value": "v_proj", "out": "out_proj"}
_BART_EPS = 1e-5  # BART's nn.LayerNorm default; its config has no epsilon


def _bart_attention(hf_name: str, ours: str) -> list:
  return attention_rows({n: f"{hf_name}.{p}" for n, p in _BART_ATTENTION.items()}, ours)


_BART_LAYER = [  # "{side}": encoder or decoder (the same name on both sides), "{i}": the layer
    *_bart_attention("model.{side}.layers.{i}.self_attn", "{side}/layers_{i}/self_attention/attention"),
    *ln_rows("model.{side}.layers.{i}.self_attn_layer_norm", "{side}/layers_{i}/self_attention/layer_norm"),
    *dense_rows("model.{side}.layers.{i}.fc1", "{side}/layers_{i}/feed_forward/intermediate"),
    *dense_rows("model.{side}.layers.{i}.fc2", "{side}/layers_{i}/feed_forward/output"),
    *ln_rows("model.{side}.layers.{i}.final_layer_norm", "{side}/layers_{i}/feed_forward/layer_norm"),
]
_BART_CROSS = [
    *_bart_attention("model.{side}.layers.{i}.encoder_attn", "{side}/layers_{i}/cross_attention/attention"),
    *ln_rows("model.{side}.layers.{i}.encoder_attn_layer_norm", "{side}/layers_{i}/cross_attention/layer_norm"),
]
_SIDES = ("encoder", "decoder")

# Tokenizer files transformers reads from a folder, and what a bare vocabulary file of each kind (as
# `vocabularies.load_vocabulary` reads it) becomes, with the tokenizer_config.json it needs.
_TOKENIZER_FILES = ("sentencepiece.bpe.model", "tokenizer.json", "vocab.txt", "tokenizer_config.json",
                    "special_tokens_map.json", "added_tokens.json")
_VOCABULARY_FILES = {
    ".model": ("sentencepiece.bpe.model", {"tokenizer_class": "XLMRobertaTokenizer"}),
    ".json": ("tokenizer.json", {"tokenizer_class": "PreTrainedTokenizerFast"}),
    ".txt": ("vocab.txt", {"tokenizer_class": "BertTokenizer", "do_lower_case": False}),  # a bare vocab.txt is cased
}


@dataclasses.dataclass(frozen=True)
class Export:
  """A transformers model: its class, config.json and weights (HF name -> float32 array)."""

  architecture: str
  config: dict
  tensors: dict


# ------------------------------------------------------------------ encoders


def _tensors(rows: list, params: dict, extra: tuple = ()) -> dict:
  """The HF tensors of `rows` from `params`; a `ConfigError` naming parameters no row (nor `extra`) takes, but
  the pooler (which only BERT's sequence classification reads)."""
  flat = nested.flatten(params, "/")
  used = {ours for _, ours, _ in rows} | set(extra)
  left = sorted(k for k in set(flat) - used if not k.startswith("backbone/pooler/"))
  if left:
    raise errors.ConfigError(f"parameters {', '.join(left[:4])} have no transformers counterpart")
  missing = sorted(used - set(flat) - set(extra))
  if missing:
    raise errors.DataError(f"the checkpoint lacks {', '.join(missing[:4])}; not the model its run_config.json names")
  return {name: np.ascontiguousarray(conv.to_hf(np.asarray(flat[ours], np.float32))) for name, ours, conv in rows}


def _plain_encoder(config: TransformerConfig, backbone: dict) -> tuple[TransformerConfig, dict]:
  """(config, backbone) as transformers has them: layers unrolled, a token-type table (one zero row if none)."""
  if config.num_languages:
    raise errors.ConfigError(f"language embeddings (num_languages={config.num_languages}) have no transformers "
                             "counterpart")
  backbone = dict(backbone)
  if config.scan_layers:
    backbone["encoder"] = unstack_layer_params(backbone["encoder"], config.num_layers)
  if config.type_vocab_size == 0:
    emb = backbone["embeddings"]
    zeros = np.zeros((1, config.hidden_size), np.float32)
    backbone["embeddings"] = {**emb, "token_type_embeddings": {"embedding": zeros}}
  return config.replace(scan_layers=False, type_vocab_size=max(config.type_vocab_size, 1)), backbone


def _label_fields(count: int, labels: Optional[list]) -> dict:
  """id2label / label2id: the run's names when there is one per class, else transformers' `LABEL_i`."""
  if labels is None or len(labels) != count:
    labels = [f"LABEL_{i}" for i in range(count)]
  names = [str(x) for x in labels]
  return {"id2label": dict(enumerate(names)), "label2id": {n: i for i, n in enumerate(names)}}


def _encoder_export(config: TransformerConfig, params: dict, suffix: str, head_rows: list, pooler: bool = False,
                    **fields) -> Export:
  """An encoder with the head `head_rows` (task-network paths) as `<family class><suffix>`."""
  model_type, cls, prefix = _FAMILIES[hf.family_of(config)]
  config, backbone = _plain_encoder(config, params["backbone"])
  encoder = hf.encoder_rows(config.num_layers, pooler)
  rows = [(f"{prefix}.{name}", f"backbone/{ours}", conv) for name, ours, conv in encoder]
  tensors = _tensors(rows + head_rows, {**params, "backbone": backbone})
  return Export(cls + suffix, {**hf.config_to_hf(config, model_type), "architectures": [cls + suffix], **fields},
                tensors)


def _classification(model: dict, config: TransformerConfig, params: dict, labels) -> Export:
  head = model.get("head", "pooler")
  if head not in _CLASSIFIERS:
    raise errors.ConfigError(f"classification head {head!r} has no transformers counterpart")
  family, rows = _CLASSIFIERS[head]
  ours = hf.family_of(config)
  if ours != family:
    other = next(h for h, (f, _) in _CLASSIFIERS.items() if f == ours)
    raise errors.ConfigError(f"head={head!r} does not map: an encoder with {_POSITIONS[ours]} exports as "
                             f"{_FAMILIES[ours][1]}ForSequenceClassification, which has {_HEADS[other]}")
  count = int(model.get("num_classes", 1))
  fields = _label_fields(count, labels)
  if model["class"] == "RatingRegressionModel":
    fields["problem_type"] = "regression"
  return _encoder_export(config, params, "ForSequenceClassification", rows, pooler=head == "pooler", **fields)


def _tagging(model: dict, config: TransformerConfig, params: dict, labels) -> Export:
  return _encoder_export(config, params, "ForTokenClassification", dense_rows("classifier", "classifier"),
                         **_label_fields(int(model["num_labels"]), labels))


def _qa(model: dict, config: TransformerConfig, params: dict, labels) -> Export:
  del model, labels
  return _encoder_export(config, params, "ForQuestionAnswering", dense_rows("qa_outputs", "qa_outputs"))


# ------------------------------------------------------------------- seq2seq


def _bart_positions(config: TransformerConfig, backbone: dict, own: str) -> dict:
  """Each side's position table (the decoder's in `own`) as BART's `embed_positions`: two unused offset rows, then
  the rows from a sequence's first token on, token type 0 folded in."""
  first = config.max_positions - layers.max_tokens(config)
  offset = np.zeros((2, config.hidden_size), np.float32)
  type_0 = np.asarray(backbone["embeddings"]["token_type_embeddings"]["embedding"], np.float32)[0]
  return {f"model.{side}.embed_positions.weight":
          np.concatenate([offset, np.asarray(backbone[tree]["position_embeddings"]["embedding"])[first:] + type_0])
          for side, tree in zip(_SIDES, ("embeddings", own))}


def _bart_rows(config: TransformerConfig, s2s, own: str) -> list:
  """The table of a `Seq2SeqNetwork` (`own`: the decoder's embedding subtree) as BartForConditionalGeneration."""
  def fill(rows, side, i):
    return [(name.format(side=side, i=i), ours.format(side=side, i=i), conv) for name, ours, conv in rows]
  rows = [("model.shared.weight", "embeddings/word_embeddings/embedding", SAME),
          *ln_rows("model.encoder.layernorm_embedding", "embeddings/layer_norm"),
          *ln_rows("model.decoder.layernorm_embedding", f"{own}/layer_norm")]
  rows += [row for i in range(config.num_layers) for row in fill(_BART_LAYER, "encoder", i)]
  rows += [row for i in range(s2s.decoder_layers) for row in fill(_BART_LAYER + _BART_CROSS, "decoder", i)]
  if not s2s.tie_output:  # transformers then ties nothing: every table is written
    rows += [(f"model.{side}.embed_tokens.weight", "embeddings/word_embeddings/embedding", SAME) for side in _SIDES]
    rows.append(("lm_head.weight", "output_projection/kernel", linear(1)))
  return rows


def _bart_config(config: TransformerConfig, s2s, eos_id: int, bos_id: Optional[int]) -> dict:
  return {
      "model_type": "bart", "architectures": ["BartForConditionalGeneration"], "vocab_size": config.vocab_size,
      "d_model": config.hidden_size, "encoder_layers": config.num_layers, "decoder_layers": s2s.decoder_layers,
      "encoder_attention_heads": config.num_heads, "decoder_attention_heads": config.num_heads,
      "encoder_ffn_dim": config.mlp_dim, "decoder_ffn_dim": config.mlp_dim, "activation_function": "gelu",
      "dropout": config.dropout_rate, "attention_dropout": config.attention_dropout_rate, "activation_dropout": 0.0,
      "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0, "max_position_embeddings": layers.max_tokens(config),
      "scale_embedding": s2s.scale_decoder_embeddings, "tie_word_embeddings": s2s.tie_output,
      "is_encoder_decoder": True, "pad_token_id": config.pad_token_id, "eos_token_id": eos_id,
      "bos_token_id": bos_id, "decoder_start_token_id": bos_id, "forced_eos_token_id": None,
  }


def _seq2seq(model: dict, config: TransformerConfig, params: dict, labels, special: dict) -> Export:
  from xtreme_jax.networks.seq2seq import Seq2SeqConfig  # pylint: disable=g-import-not-at-top
  del labels
  s2s = Seq2SeqConfig(**{k: v for k, v in (model.get("seq2seq") or {}).items() if k != "class"})
  if s2s.scale_encoder_embeddings != s2s.scale_decoder_embeddings:
    raise errors.ConfigError(f"scale_encoder_embeddings={s2s.scale_encoder_embeddings}, scale_decoder_embeddings="
                             f"{s2s.scale_decoder_embeddings}: BART's scale_embedding scales both sides' word "
                             "embeddings by sqrt(d), or neither")
  if config.layer_norm_eps != _BART_EPS:
    raise errors.ConfigError(f"layer_norm_eps={config.layer_norm_eps}: BART's LayerNorms use {_BART_EPS}")
  config, backbone = _plain_encoder(config, params["backbone"])
  own = "decoder_embeddings" if s2s.separate_decoder_embeddings else "embeddings"
  rows = [(name, f"backbone/{ours}", conv) for name, ours, conv in _bart_rows(config, s2s, own)]
  folded = (*{f"backbone/{tree}/position_embeddings/embedding" for tree in ("embeddings", own)},
            "backbone/embeddings/token_type_embeddings/embedding")  # into `_bart_positions`
  tensors = _tensors(rows, {**params, "backbone": backbone}, folded)
  tensors.update(_bart_positions(config, backbone, own))
  tensors["final_logits_bias"] = np.zeros((1, config.vocab_size), np.float32)
  return Export("BartForConditionalGeneration", _bart_config(config, s2s, int(model.get("eos_id", 2)),
                                                             special.get("bos_token_id")), tensors)


_BUILDERS = {
    "ClassificationModel": _classification,
    "RatingRegressionModel": _classification,
    "TaggingModel": _tagging,
    "QaModel": _qa,
}


def convert(model: dict, params: dict, labels: Optional[list] = None, special: Optional[dict] = None) -> Export:
  """The transformers model of a task model described as run_config.json records it (`runs.train.describe`:
  "class", "config", its fields) with parameters `params` (its whole tree); `labels`: the class / tag names;
  `special`: bos / eos token ids for config.json."""
  cls = model.get("class")
  if cls in _REFUSED:
    raise errors.ConfigError(f"a {cls} has no transformers counterpart: {_REFUSED[cls]}")
  if cls not in _BUILDERS and cls != "Seq2SeqModel":
    raise errors.ConfigError(f"a {cls} has no transformers counterpart; export-hf takes {', '.join(_BUILDERS)} "
                             "and Seq2SeqModel runs")
  config = TransformerConfig.from_dict({k: v for k, v in model["config"].items() if k != "class"})
  if cls == "Seq2SeqModel":
    return _seq2seq(model, config, params, labels, special or {})
  out = _BUILDERS[cls](model, config, params, labels)
  ids = {k: v for k, v in (special or {}).items() if v is not None}
  return dataclasses.replace(out, config={**out.config, **ids})


# --------------------------------------------------------------------- a run


def _vocabulary(run_config: dict) -> Optional[str]:
  """The vocabulary a run recorded: a Gin run's train_data.vocabulary (under its data_dir), a benchmark model's
  "vocabulary"; None when it records none."""
  from xtreme_jax.data import paths  # pylint: disable=g-import-not-at-top
  data = run_config.get("train_data")
  if isinstance(data, dict) and isinstance(data.get("vocabulary"), str):
    return paths.resolve(paths.local(data.get("data_dir")), paths.local(data["vocabulary"]))
  vocabulary = run_config.get("vocabulary")
  return paths.local(vocabulary) if isinstance(vocabulary, str) else None


def _labels(run_config: dict) -> Optional[list]:
  """The class / tag names: a Gin run's train_data.labels, or the labels of a benchmark model's training task."""
  from xtreme_jax.registry import BENCHMARKS  # pylint: disable=g-import-not-at-top
  data = run_config.get("train_data")
  if isinstance(data, dict) and isinstance(data.get("labels"), list):
    return data["labels"]
  benchmark = BENCHMARKS.get(str(run_config.get("mode", "")).split("-")[0])
  train = run_config.get("train")
  if benchmark is None or not isinstance(train, list) or not train or not isinstance(train[0], list):
    return None
  try:
    return list(benchmark.task(train[0][0]).labels) or None
  except errors.UserError:  # a reader task that is not a spec (e.g. SQuAD for MLQA): no labels
    return None


def tokenizer_files(vocabulary: str) -> dict:
  """{file name in the export: its bytes} for the tokenizer of `vocabulary` (a folder or a file)."""
  if fs.isdir(vocabulary):
    found = {n: os.path.join(vocabulary, n) for n in _TOKENIZER_FILES if fs.exists(os.path.join(vocabulary, n))}
    main = next((n for n in found if n in ("sentencepiece.bpe.model", "tokenizer.json", "vocab.txt")), None)
  else:
    ext = os.path.splitext(vocabulary)[1]
    if ext not in _VOCABULARY_FILES:
      return {}
    main = _VOCABULARY_FILES[ext][0]
    found = {main: vocabulary}
    if ext != ".model":  # the settings `load_vocabulary` reads next to it
      found.update({n: os.path.join(fs.dirname(vocabulary), n) for n in ("tokenizer_config.json",
                    "special_tokens_map.json") if fs.exists(os.path.join(fs.dirname(vocabulary), n))})
  files = {name: fs.read_bytes(path) for name, path in found.items()}
  if main is not None and "tokenizer_config.json" not in files:
    settings = next(s for n, s in _VOCABULARY_FILES.values() if n == main)
    files["tokenizer_config.json"] = (json.dumps(settings, indent=2) + "\n").encode("utf-8")
  return files


def _tokenizer(run_config: dict) -> tuple[dict, dict, str]:
  """(tokenizer files, bos / eos ids, what was found) of the run's vocabulary."""
  from xtreme_jax.data.vocab.vocabularies import load_vocabulary  # pylint: disable=g-import-not-at-top
  vocabulary = _vocabulary(run_config)
  if vocabulary is None:
    return {}, {}, "no tokenizer files (the run records no vocabulary)"
  if not fs.exists(vocabulary):
    return {}, {}, f"no tokenizer files ({vocabulary} does not exist)"
  vocab = load_vocabulary(vocabulary)
  files = tokenizer_files(vocabulary)
  return files, {"bos_token_id": vocab.bos_id, "eos_token_id": vocab.eos_id}, (
      f"tokenizer {', '.join(sorted(files))} from {vocabulary}" if files else f"no tokenizer files ({vocabulary})")


def save(out_dir: str, export: Export, files: Optional[dict] = None) -> None:
  """config.json, model.safetensors and `files` ({name: bytes}) into `out_dir`, all or nothing."""
  from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top

  def write(tmp: str) -> None:
    save_file(export.tensors, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as f:
      f.write(json.dumps(export.config, indent=2, sort_keys=True) + "\n")
    for name, data in (files or {}).items():
      with open(os.path.join(tmp, name), "wb") as f:
        f.write(data)

  hf.write_directory(out_dir, write)


def export_hf(run_dir: str, out_dir: str, step: Optional[int] = None) -> str:
  """Write checkpoint `step` of fine-tuning run `run_dir` as a transformers folder `out_dir` (None: the parameters
  the run predicted with: its best on dev in `best/`, else its newest checkpoint); returns the line saying what
  was written."""
  from xtreme_jax.models.veco_assembly import read_run  # pylint: disable=g-import-not-at-top
  what = "a fine-tuning run"
  run = read_run(run_dir, out_dir, what, step, prefer_best=True)
  files, special, tokenizer = _tokenizer(run.run_config)
  export = convert(run.run_config["model"], run.params, _labels(run.run_config), special)
  save(out_dir, export, files)
  return f"wrote {out_dir} as {export.architecture} (step {run.step}, {run.where}; {tokenizer})"


def cli_export_hf(argv: Optional[list[str]] = None) -> int:
  """`xtreme-jax export-hf RUN_DIR OUT [--step N]`."""
  parser = errors.ArgumentParser(
      prog="xtreme-jax export-hf",
      description="Write a fine-tuned run as a Hugging Face transformers folder (config.json, model.safetensors, "
                  "tokenizer files).")
  parser.add_argument("run_dir", metavar="RUN_DIR", help="a fine-tuning run directory")
  parser.add_argument("out", metavar="OUT", help="new (or empty) output directory")
  parser.add_argument("--step", type=int, default=None, metavar="N",
                      help="the checkpoint step (default: the newest in RUN_DIR/checkpoints; best/ steps too)")
  args = parser.parse_args(argv)
  print(export_hf(args.run_dir, args.out, args.step))
  return 0
