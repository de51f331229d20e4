"""Parameter surgery on a VECO checkpoint for fine-tuning.

* NLU: the VECO stack without cross-attention is a `TransformerEncoder`, so
  every XTREME head accepts it (`nlu_encoder`, and `export_encoder` which
  writes it in the `import-hf` format for INIT_CHECKPOINT). A checkpoint
  pretrained with XLM language embeddings first folds one language's vector
  into the position embeddings (`fold_language_embedding`): the embedding
  sum before the LayerNorm is unchanged, so the plain encoder is exact for
  inputs of that language.
* NLG: encoder = the whole stack (no cross-attention); decoder = `n` layers
  (the last n, or the first n) as independent copies with all three
  sub-layers; the token embeddings are tied (one copy, used by both sides).
  `scale_embeddings` records whether the decoder multiplies token embeddings
  by sqrt(d) (the released VECO translation checkpoints do, the XLM-R-format
  ones do not). `fresh_cross_attention=True` is VECO's XLM-R baseline: the
  checkpoint is a plain encoder (no cross-attention), the decoder copies its
  self-attention and feed-forward, and `models.base.load_backbone` gives the
  decoder's cross-attention fresh parameters. `seq2seq_backbone` is the tree
  a `Seq2SeqNetwork` loads; its `decoder_embeddings` (the decoder's own
  position table and embedding LayerNorm, used with
  `Seq2SeqConfig.separate_decoder_embeddings`) start as copies of the
  encoder's.

`read_run` reads a run's run_config.json and one checkpoint's parameters (the
export commands', `export-hf`'s too).
"""

from __future__ import annotations

import dataclasses
import logging
import os

import numpy as np

from xtreme_jax import errors, fs
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.veco import drop_cross_attention


@dataclasses.dataclass(frozen=True)
class Seq2SeqAssembly:
  """How the NLG model was cut from the VECO stack."""

  decoder_layers: int
  take: str = "last"            # "last" or "first" n layers become the decoder
  scale_embeddings: bool = False
  fresh_cross_attention: bool = False  # an encoder checkpoint (XLM-R): the decoder's cross-attention starts fresh


def fold_language_embedding(params: dict, language_id: int, config: TransformerConfig) -> dict:
  """`params` of a plain encoder (`num_languages=0`) that computes exactly what `params` computes on
  language-`language_id` input.

  A language vector (XLM) is added to every position embedding:
  word + position + type + language[l] == word + (position + language[l]) + type for every token. With
  `config.language_positions`, language l's own position table becomes the position table.
  """
  emb = dict(params["embeddings"])
  if not 0 <= language_id < config.num_languages:
    raise errors.ConfigError(f"language_id={language_id}; the checkpoint has {config.num_languages} languages")
  positions = np.asarray(emb["position_embeddings"]["embedding"], np.float32)
  if config.language_positions:
    rows = positions[language_id * config.max_positions:(language_id + 1) * config.max_positions]
  else:
    rows = positions + np.asarray(emb.pop("language_embeddings")["embedding"], np.float32)[language_id][None, :]
  emb["position_embeddings"] = {"embedding": rows}
  return {**params, "embeddings": emb}


def nlu_encoder(veco_params: dict, config: TransformerConfig, language_id: int | None = None,
                keep_languages: bool = False) -> dict:
  """A `TransformerEncoder` parameter tree (cross-attention dropped). A checkpoint with language embeddings
  needs `language_id` (folded in: a plain encoder) or `keep_languages` (an encoder fed language ids)."""
  if config.num_languages and language_id is None and not keep_languages:
    raise errors.ConfigError("the checkpoint has language embeddings: pass language_id (an index into the "
                             "pretraining languages) to fold that language into the position embeddings")
  if not config.num_languages and (language_id is not None or keep_languages):
    raise errors.ConfigError(f"language_id={language_id} given, but the checkpoint has no language embeddings")
  folded = config.num_languages and not keep_languages
  return drop_cross_attention(fold_language_embedding(veco_params, language_id, config) if folded else veco_params)


def nlg_encoder_decoder(veco_params: dict, config: TransformerConfig, assembly: Seq2SeqAssembly) -> dict:
  """{"embeddings", "encoder", "decoder", "mlm_head", "assembly"} for a seq2seq model.

  The decoder's `layers_{j}` are deep copies (self_attention, cross_attention,
  feed_forward) of the chosen VECO layers; training one side never changes
  the other. Embeddings and the output head are shared (tied) by both sides.
  """
  if config.num_languages:
    raise errors.ConfigError("the NLG assembly does not support checkpoints with language embeddings (source and "
                     "target languages differ, so no single language can be folded in)")
  n, total = assembly.decoder_layers, config.num_layers
  if not 0 < n <= total:
    raise errors.ConfigError(f"decoder_layers={n}; expected 1..{total}")
  if assembly.take not in ("last", "first"):
    raise errors.ConfigError(f"take={assembly.take!r}; expected 'last' or 'first'")
  chosen = range(total - n, total) if assembly.take == "last" else range(n)
  layers = veco_params["encoder"]
  missing = [f"layers_{i}" for i in chosen if "cross_attention" not in layers[f"layers_{i}"]]
  if missing and not assembly.fresh_cross_attention:
    raise errors.DataError(f"{missing} have no cross_attention: not a VECO checkpoint (for an encoder checkpoint "
                           "such as XLM-R, set Seq2SeqAssembly.fresh_cross_attention = True)")
  decoder = {f"layers_{j}": to_numpy(layers[f"layers_{i}"]) for j, i in enumerate(chosen)}
  encoder = nlu_encoder(veco_params, config)
  return {"embeddings": encoder["embeddings"], "encoder": encoder["encoder"], "decoder": decoder,
          "mlm_head": encoder.get("mlm_head"), "assembly": dataclasses.asdict(assembly)}


def seq2seq_backbone(pretrained: dict, config: TransformerConfig, assembly: Seq2SeqAssembly) -> dict:
  """The `Seq2SeqNetwork` tree (embeddings, encoder, decoder) cut from a VECO or encoder checkpoint, or an
  encoder-decoder checkpoint (`export_seq2seq`) as it is (its decoder must have `assembly.decoder_layers`)."""
  if "decoder" in pretrained:
    layers = sum(k.startswith("layers_") for k in pretrained["decoder"])
    if layers != assembly.decoder_layers:
      raise errors.ConfigError(f"the encoder-decoder checkpoint has {layers} decoder layers but the model "
                               f"{assembly.decoder_layers}; set Seq2SeqConfig.decoder_layers (DECODER_LAYERS) to "
                               f"{layers}")
    kept = ("embeddings", "decoder_embeddings", "encoder", "decoder", "output_projection")
    return with_decoder_embeddings({k: v for k, v in pretrained.items() if k in kept})
  out = nlg_encoder_decoder(pretrained, config, assembly)
  return with_decoder_embeddings({k: out[k] for k in ("embeddings", "encoder", "decoder")})


def with_decoder_embeddings(backbone: dict) -> dict:
  """`backbone` with `decoder_embeddings` (`Seq2SeqConfig.separate_decoder_embeddings`: the decoder's own position
  table and embedding LayerNorm) as independent copies of the encoder's where it has none, as fairseq loads one
  pretrained stack into its encoder's and decoder's separate tables; a model without them drops it."""
  if "decoder_embeddings" in backbone:
    return backbone
  emb = backbone["embeddings"]
  return {**backbone, "decoder_embeddings": to_numpy({k: emb[k] for k in ("position_embeddings", "layer_norm")})}


def export_encoder(run_dir: str, out_dir: str, language_id: int | str | None = None) -> str:
  """Write the NLU encoder of a VECO pretraining run's newest checkpoint in the `import-hf` format.

  A run with language embeddings needs `language_id`: the index of the language folded in (a plain encoder,
  see `nlu_encoder`) or `'all'`: every language kept, named in the config's `languages` (the run's
  languages.json), so that fine-tuning feeds each example its language's id.
  `out_dir` is written all or nothing (`hf.save_imported`).
  """
  from xtreme_jax import hf
  config, params = _newest_run_params(run_dir, out_dir)
  if language_id == "all":
    if not config.num_languages:
      raise errors.ConfigError(f"{run_dir} has no language embeddings to keep (LANGUAGE_ID 'all')")
    index = hf.read_json(os.path.join(run_dir, "languages.json"), "the run's language ids")
    errors.require(sorted(index.values()) == list(range(config.num_languages)), f"{run_dir}/languages.json names "
                   f"{len(index)} languages but the model has num_languages={config.num_languages}: the ids without a "
                   "language cannot be kept; fold one language in (LANGUAGE_ID) instead")
    config = config.replace(languages=tuple(sorted(index, key=index.get)))
    encoder = nlu_encoder(params, config, keep_languages=True)
  else:
    encoder = nlu_encoder(params, config, language_id)
    config = config.replace(num_languages=0, languages=(), language_positions=False)
  hf.save_imported(out_dir, config, to_numpy(encoder))
  return out_dir


def export_veco(run_dir: str, out_dir: str) -> str:
  """Write a VECO pretraining run's newest stack, cross-attention included, in the `import-hf` format: the
  initial checkpoint of NLG fine-tuning (`seq2seq_backbone`: the decoder copies its layers with their
  cross-attention). A run with language embeddings is refused, as by `nlg_encoder_decoder`."""
  from xtreme_jax import hf
  config, params = _newest_run_params(run_dir, out_dir)
  if config.num_languages:
    raise errors.ConfigError(f"{run_dir} was pretrained with language embeddings, which the NLG assembly does not "
                             "support (source and target languages differ)")
  hf.save_imported(out_dir, config, to_numpy(params))
  return out_dir


def export_seq2seq(run_dir: str, out_dir: str) -> str:
  """Write the encoder-decoder of an xDAE or xFNP pretraining run's newest checkpoint in the `import-hf`
  format, the INIT_CHECKPOINT of generation fine-tuning (`seq2seq_backbone` takes it as it is). xFNP's
  predicting-stream embeddings (outside the backbone) are left out: fine-tuning decodes with the one-stream
  decoder."""
  from xtreme_jax import hf
  config, params = _newest_run_params(run_dir, out_dir)
  if "decoder" not in params:
    raise errors.ConfigError(f"{run_dir} is not an encoder-decoder run (no params/backbone/decoder); export-seq2seq "
                             "takes xDAE / xFNP pretraining runs (VECO: export-veco, encoders: export-encoder)")
  hf.save_imported(out_dir, config, to_numpy(params))
  return out_dir


@dataclasses.dataclass(frozen=True)
class RunParams:
  """A run's recorded settings and the parameters of one of its checkpoints."""

  run_config: dict           # its run_config.json
  config: TransformerConfig  # the model's (run_config.json's model.config)
  step: int
  where: str                 # the checkpoint folder read
  params: dict               # every parameter of the model, as stored


def read_run(run_dir: str, out_dir: str, what: str = "a pretraining run", step: int | None = None,
             prefer_best: bool = False) -> RunParams:
  """The settings and checkpoint `step` of run `run_dir`, which should be `what` (None: the newest checkpoint,
  or with `prefer_best` the best-on-dev parameters in `best/` where the run kept some: those it predicted
  with); refuses a non-empty `out_dir` first (before any restore)."""
  from xtreme_jax import hf
  config_path = os.path.join(run_dir, "run_config.json")
  run_config = hf.read_json(config_path, f"the run_config.json of {what}")
  try:
    config = TransformerConfig.from_dict({k: v for k, v in run_config["model"]["config"].items() if k != "class"})
  except (KeyError, TypeError, AttributeError) as e:
    raise errors.DataError(f"{config_path}: no model.config object ({type(e).__name__}: {e}); expected the "
                           f"run_config.json of {what}") from e
  except errors.UserError as e:
    raise type(e)(f"{config_path}: {e}") from e
  hf.refuse_non_empty(os.path.abspath(out_dir))  # before the restore
  step, where, params = _restore_params(run_dir, step, what, prefer_best)
  return RunParams(run_config, config, step, where, params)


# Where a run keeps parameters: folder -> the orbax item holding them (`training.checkpoints`: the Checkpointer's
# train state, BestParams' parameters).
_RUN_PARAMS = {"checkpoints": "state", "best": "params"}


class _ReadOnlyNotice(logging.Filter):
  """Drops orbax's notice that a manager opened read-only is read-only (what the export asks for)."""

  def filter(self, record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith(("Given directory is read only", "CheckpointManagerOptions.read_only"))


def _manager(run_dir: str, folder: str):
  """A read-only orbax manager of the run's `folder`, opened without orbax's notice that it is read-only."""
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top
  quiet, absl = _ReadOnlyNotice(), logging.getLogger("absl")
  absl.addFilter(quiet)
  try:
    return ocp.CheckpointManager(fs.abspath(os.path.join(run_dir, folder)), item_names=(_RUN_PARAMS[folder], "meta"),
                                 options=ocp.CheckpointManagerOptions(create=False, read_only=True,
                                                                      save_interval_steps=0))
  finally:
    absl.removeFilter(quiet)


def _restore_params(run_dir: str, step: int | None, what: str, prefer_best: bool = False) -> tuple[int, str, dict]:
  """(step, its folder, parameters as stored) of checkpoint `step` in `checkpoints/` (None: the newest there, or
  `best/`'s with `prefer_best`), or in `best/` when only that holds it."""
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top
  steps = {}
  for folder in _RUN_PARAMS:
    if fs.isdir(os.path.join(run_dir, folder)):
      with _manager(run_dir, folder) as manager:
        steps[folder] = sorted(manager.all_steps())
  if step is None and prefer_best and steps.get("best"):
    step = steps["best"][-1]
  if step is None:
    if not steps.get("checkpoints"):
      raise errors.MissingInputError(f"{run_dir}/checkpoints holds no checkpoint; expected {what}")
    step = steps["checkpoints"][-1]
  folder = next((f for f, held in steps.items() if step in held), None)
  if folder is None:
    held = "; ".join(f"{f}/: {', '.join(map(str, s))}" for f, s in steps.items() if s) or "none"
    raise errors.MissingInputError(f"{run_dir} holds no checkpoint of step {step} (steps held: {held})")
  item = _RUN_PARAMS[folder]
  with _manager(run_dir, folder) as manager:
    restored = manager.restore(step, args=ocp.args.Composite(**{item: ocp.args.StandardRestore()}))[item]
  return step, os.path.join(run_dir, folder, str(step)), restored["params"] if item == "state" else restored


def _newest_run_params(run_dir: str, out_dir: str) -> tuple[TransformerConfig, dict]:
  """(model config, backbone parameters) of the newest checkpoint of a pretraining run; refuses a non-empty
  `out_dir` first."""
  run = read_run(run_dir, out_dir)
  return run.config, run.params["backbone"]


def to_numpy(tree):
  """Independent float32 numpy copies of every leaf of a nested dict."""
  return {k: to_numpy(v) if isinstance(v, dict) else np.array(v, np.float32) for k, v in tree.items()}
