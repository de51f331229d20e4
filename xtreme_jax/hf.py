"""Import Hugging Face BERT / RoBERTa / XLM-R checkpoints into `TransformerEncoder`.

A checkpoint directory holds `config.json` and `model.safetensors` (or
`pytorch_model.bin`, or sharded variants with an `*.index.json`). Names are
first normalised: the base-model prefix (`bert.` / `roberta.`) is stripped when
present (a saved `BertModel` has none) and old `LayerNorm.gamma/beta` become
`LayerNorm.weight/bias`. Each name then maps through one table row
`(HF name, our param path, conversion)`:

    embeddings.{word,position,token_type}_embeddings.weight -> embeddings/*/embedding
    embeddings.LayerNorm                                   -> embeddings/layer_norm
    encoder.layer.{i}.attention.self.{query,key,value}     -> encoder/layers_{i}/self_attention/attention/{query,key,value}
    encoder.layer.{i}.attention.output.dense               -> .../self_attention/attention/out
    encoder.layer.{i}.attention.output.LayerNorm           -> .../self_attention/layer_norm
    encoder.layer.{i}.intermediate.dense                   -> .../feed_forward/intermediate
    encoder.layer.{i}.output.dense / .output.LayerNorm     -> .../feed_forward/output / layer_norm
    pooler.dense                                           -> pooler/dense
    cls.predictions.transform.{dense,LayerNorm}, .bias     -> mlm_head/{dense,layer_norm,bias}   (BERT)
    lm_head.{dense,layer_norm}, lm_head.bias               -> mlm_head/{dense,layer_norm,bias}   (RoBERTa)
    cls.predictions.decoder / lm_head.decoder .weight      -> mlm_head/decoder/kernel           (untied only)

Conversions: PyTorch Linear weights are (out, in), so kernels are transposed
and reshaped to our (embed, heads, head_dim) query/key/value and
(heads, head_dim, embed) out kernels; q/k/v biases become (heads, head_dim);
LayerNorm weight -> scale. Each `Conversion` also converts back (`to_hf`):
`hf_export` writes Hugging Face checkpoints through the same rows, and
`config_to_hf` writes the config.json fields `config_from_hf` reads. The MLM
output projection is untied (`tie_word_embeddings=False`, its own
`mlm_head/decoder` kernel) when the config says `tie_word_embeddings: false`,
or when the checkpoint holds a decoder weight that differs from the word
embeddings: transformers 5.x then loads that weight rather than re-tying it,
and so do we. A decoder weight equal to the word embeddings is tied and
dropped. Every missing, unexpected or mis-shaped key is collected into a
single one-line `CheckpointMismatchError`. The optional pooler and MLM head,
when wholly absent, are freshly initialised and listed in the `LoadReport`.

Every problem a user can cause (a missing or malformed `config.json`, a
truncated weight file, an unsupported architecture, a non-empty output
directory) is an `errors.UserError` naming the file. `save_imported` writes
into a temporary sibling directory renamed into place at the end, so an
interrupted import never leaves a directory that looks complete (a killed
one's temporary directory is removed by the next write of that output).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import logging
import math
import os
import re
import shutil
import tempfile
import zlib
from typing import Callable, NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from xtreme_jax import atomic, errors, fs, nested
from xtreme_jax.networks.config import TransformerConfig
from xtreme_jax.networks.encoder import TransformerEncoder, stack_layer_params

logger = logging.getLogger(__name__)

_FAMILY = {"bert": "bert", "roberta": "roberta", "xlm-roberta": "roberta"}
_OPTIONAL = ("pooler", "mlm_head")  # freshly initialised when wholly absent


_REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
             "max_position_embeddings")
# config.json key -> TransformerConfig field: read by `config_from_hf`, written by `config_to_hf`.
_CONFIG_FIELDS = {
    "vocab_size": "vocab_size", "hidden_size": "hidden_size", "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads", "intermediate_size": "mlp_dim", "max_position_embeddings": "max_positions",
    "type_vocab_size": "type_vocab_size", "pad_token_id": "pad_token_id", "layer_norm_eps": "layer_norm_eps",
    "hidden_dropout_prob": "dropout_rate", "attention_probs_dropout_prob": "attention_dropout_rate",
}
# Per family, what transformers assumes when config.json leaves a field out, and how positions are numbered.
_FAMILY_DEFAULTS = {
    "bert": dict(type_vocab_size=2, pad_token_id=0, layer_norm_eps=1e-12, position_style="absolute"),
    "roberta": dict(type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5, position_style="roberta"),
}
_DECODER = {"bert": "cls.predictions.decoder.weight", "roberta": "lm_head.decoder.weight"}
_MAX_LISTED = 8  # per group of a CheckpointMismatchError


class CheckpointMismatchError(errors.DataError):
  """The checkpoint's tensors do not match the parameter tree the config implies."""


class OutputExistsError(errors.UserError, FileExistsError):
  """The output directory exists and is not empty."""


class MissingDependencyError(errors.UserError, ImportError):
  """Reading the checkpoint needs an optional package that is not installed."""


# --------------------------------------------------------------------- config


def config_from_hf(hf_config: dict, **overrides) -> TransformerConfig:
  """`TransformerConfig` for an HF `config.json` dict (bert / roberta / xlm-roberta).

  `tie_word_embeddings` defaults to True, as in transformers.
  """
  model_type = hf_config.get("model_type")
  if model_type not in _FAMILY:
    raise errors.ConfigError(f"unsupported model_type {model_type!r}; expected one of {sorted(_FAMILY)}")
  act = hf_config.get("hidden_act", "gelu")
  if act != "gelu":
    raise errors.ConfigError(f"unsupported hidden_act {act!r}: TransformerEncoder implements only exact (erf) "
                             "'gelu'; tanh-approximate or other activations would silently change the outputs")
  pos = hf_config.get("position_embedding_type", "absolute")
  if pos != "absolute":
    raise errors.ConfigError(f"unsupported position_embedding_type {pos!r}; only 'absolute' is implemented")
  missing = [k for k in _REQUIRED if k not in hf_config]
  if missing:
    raise errors.DataError(f"the {model_type} config lacks {', '.join(missing)}; expected every one of "
                           f"{', '.join(_REQUIRED)}")
  given = {field: hf_config[key] for key, field in _CONFIG_FIELDS.items() if hf_config.get(key) is not None}
  cfg = TransformerConfig(**{**_FAMILY_DEFAULTS[_FAMILY[model_type]], **given},
                          tie_word_embeddings=hf_config.get("tie_word_embeddings") is not False)  # absent or null: tied
  return cfg.replace(**overrides)


def family_of(config: TransformerConfig) -> str:
  """'roberta' for RoBERTa-style positions (XLM-R), else 'bert': the family `config_from_hf` read it as."""
  return "roberta" if config.position_style == "roberta" else "bert"


def config_to_hf(config: TransformerConfig, model_type: str) -> dict:
  """The config.json fields of `config` for an HF `model_type` of its family (`config_from_hf` reads them back)."""
  return {"model_type": model_type, **{key: getattr(config, field) for key, field in _CONFIG_FIELDS.items()},
          "hidden_act": "gelu", "position_embedding_type": "absolute",
          "tie_word_embeddings": config.tie_word_embeddings}


# -------------------------------------------------------------- mapping table


class Conversion(NamedTuple):
  """How one tensor converts between a PyTorch checkpoint and our parameter tree (either way)."""

  hf_shape: Callable[[tuple], tuple]                  # our shape -> expected HF shape
  convert: Callable[[np.ndarray, tuple], np.ndarray]  # (HF tensor, our shape) -> ours (import)
  to_hf: Callable[[np.ndarray], np.ndarray]           # ours -> HF tensor (export)


SAME = Conversion(lambda s: tuple(s), lambda x, s: x, lambda x: x)
FLAT = Conversion(lambda s: (math.prod(s),), lambda x, s: x.reshape(s), lambda x: x.reshape(-1))


def linear(n_in: int) -> Conversion:
  """Torch (out, in) weight <-> our kernel whose first `n_in` axes are inputs."""
  return Conversion(lambda s: (math.prod(s[n_in:]), math.prod(s[:n_in])), lambda x, s: x.T.reshape(s),
                    lambda x: x.reshape(math.prod(x.shape[:n_in]), -1).T)


def dense_rows(hf: str, ours: str, kernel: Conversion = linear(1), bias: Conversion = SAME) -> list:
  """Table rows (HF name, our param path, conversion) of a torch Linear `hf` and our dense `ours`."""
  return [(f"{hf}.weight", f"{ours}/kernel", kernel), (f"{hf}.bias", f"{ours}/bias", bias)]


def ln_rows(hf: str, ours: str) -> list:
  return [(f"{hf}.weight", f"{ours}/scale", SAME), (f"{hf}.bias", f"{ours}/bias", SAME)]


def attention_rows(hf: dict, ours: str) -> list:
  """Rows of one attention block: `hf` names the torch Linear of our query / key / value / out."""
  qkv = [row for n in ("query", "key", "value") for row in dense_rows(hf[n], f"{ours}/{n}", linear(1), FLAT)]
  return qkv + dense_rows(hf["out"], f"{ours}/out", linear(2))


_EMBEDDINGS = [
    *[(f"embeddings.{n}.weight", f"embeddings/{n}/embedding", SAME)
      for n in ("word_embeddings", "position_embeddings", "token_type_embeddings")],
    *ln_rows("embeddings.LayerNorm", "embeddings/layer_norm"),
]
_LAYER = [  # "{i}" is the layer index
    *attention_rows({**{n: f"encoder.layer.{{i}}.attention.self.{n}" for n in ("query", "key", "value")},
                     "out": "encoder.layer.{i}.attention.output.dense"}, "encoder/layers_{i}/self_attention/attention"),
    *ln_rows("encoder.layer.{i}.attention.output.LayerNorm", "encoder/layers_{i}/self_attention/layer_norm"),
    *dense_rows("encoder.layer.{i}.intermediate.dense", "encoder/layers_{i}/feed_forward/intermediate"),
    *dense_rows("encoder.layer.{i}.output.dense", "encoder/layers_{i}/feed_forward/output"),
    *ln_rows("encoder.layer.{i}.output.LayerNorm", "encoder/layers_{i}/feed_forward/layer_norm"),
]
_POOLER = dense_rows("pooler.dense", "pooler/dense")
_HEAD = {  # the decoder row applies only to an untied head (the table keeps the rows the config's tree has)
    "bert": [*dense_rows("cls.predictions.transform.dense", "mlm_head/dense"),
             *ln_rows("cls.predictions.transform.LayerNorm", "mlm_head/layer_norm"),
             ("cls.predictions.bias", "mlm_head/bias", SAME),
             (_DECODER["bert"], "mlm_head/decoder/kernel", linear(1))],
    "roberta": [*dense_rows("lm_head.dense", "mlm_head/dense"),
                *ln_rows("lm_head.layer_norm", "mlm_head/layer_norm"),
                ("lm_head.bias", "mlm_head/bias", SAME),
                (_DECODER["roberta"], "mlm_head/decoder/kernel", linear(1))],
}
# Checkpoint names (normalised) that are safe to drop (the decoder weight only
# when tied, i.e. equal to the word embeddings); decoder biases only when they
# equal the head bias they duplicate.
_IGNORABLE = [
    r"(^|\.)position_ids$", r"(^|\.)embeddings\.token_type_ids$", r"^cls\.seq_relationship\.",
    r"^cls\.predictions\.decoder\.weight$", r"^lm_head\.decoder\.weight$",
]
_DUPLICATE_BIAS = {"cls.predictions.decoder.bias": "cls.predictions.bias", "lm_head.decoder.bias": "lm_head.bias"}


def encoder_rows(num_layers: int, pooler: bool = True) -> list:
  """The table of a `TransformerEncoder` (unrolled layers) without its MLM head, HF names without the base-model
  prefix; its pooler's rows only with `pooler`."""
  rows = _EMBEDDINGS + [(h.format(i=i), o.format(i=i), c) for i in range(num_layers) for h, o, c in _LAYER]
  return rows + (_POOLER if pooler else [])


def _table(config: TransformerConfig, family: str):
  return encoder_rows(config.num_layers) + _HEAD[family]


# ------------------------------------------------------------------- reading


def _resolve(src: str) -> str:
  if os.path.isdir(src):
    return src
  try:
    from huggingface_hub import snapshot_download  # pylint: disable=g-import-not-at-top
    path = snapshot_download(src, allow_patterns=["config.json", "model*.safetensors*"])
    if not glob.glob(os.path.join(path, "*.safetensors")):
      path = snapshot_download(src, allow_patterns=["config.json", "pytorch_model*.bin*"])
    return path
  except Exception as e:  # ImportError, offline, unknown repo, ...
    raise errors.MissingInputError(f"{src!r} does not exist locally and could not be fetched from the Hugging "
                                   f"Face hub ({type(e).__name__}: {errors.one_line(e)})") from e


def read_json(path: str, what: str) -> dict:
  """The JSON object in `path`; a `UserError` naming the file when it is absent or malformed."""
  if not fs.isfile(path):
    raise errors.MissingInputError(f"{path} does not exist; expected {what}")
  try:
    obj = json.loads(fs.read_bytes(path).decode("utf-8"))
  except json.JSONDecodeError as e:
    raise errors.DataError(f"{errors.location(path, e.lineno)}: malformed JSON ({e.msg}); expected {what}") from e
  except UnicodeDecodeError as e:
    raise errors.DataError(f"{errors.location(path, byte=e.start)}: not UTF-8 text; expected {what}") from e
  if not isinstance(obj, dict):
    raise errors.DataError(f"{path}: a JSON {type(obj).__name__}; expected {what}")
  return obj


def _read_hf_config(path: str) -> tuple[dict, TransformerConfig]:
  """(config.json dict, its TransformerConfig) of checkpoint directory `path`; errors name the file."""
  config_path = os.path.join(path, "config.json")
  hf_config = read_json(config_path, "the checkpoint's config.json object (model_type, hidden_size, ...)")
  try:
    return hf_config, config_from_hf(hf_config)
  except errors.UserError as e:
    raise type(e)(f"{config_path}: {e}") from e
  except (TypeError, ValueError) as e:  # a field of the wrong type or value
    raise errors.DataError(f"{config_path}: {e}") from e


def _read_safetensors(path: str) -> dict:
  from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top
  try:
    try:
      return load_file(path)
    except TypeError:  # bfloat16 is not a numpy dtype: go through jax
      from safetensors.flax import load_file as load_flax  # pylint: disable=g-import-not-at-top
      return {k: np.asarray(v, np.float32) for k, v in load_flax(path).items()}
  except Exception as e:  # SafetensorError (truncated / corrupt), OSError
    raise errors.DataError(f"{path}: not a readable safetensors file ({errors.one_line(e)}); expected a "
                           "complete model.safetensors (an interrupted download or save truncates it)") from e


def _read_torch(path: str) -> dict:
  try:
    import torch  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise MissingDependencyError(f"{path} is a PyTorch pickle; reading it needs torch: pip install "
                                 "'xtreme-jax[torch]' (or convert the checkpoint to model.safetensors)") from e
  try:
    sd = torch.load(path, map_location="cpu", weights_only=True)
  except Exception as e:  # truncated zip, not a pickle, unsafe pickle
    raise errors.DataError(f"{path}: not a readable PyTorch checkpoint ({type(e).__name__}: "
                           f"{errors.one_line(e)[:200]}); expected a complete pytorch_model.bin") from e
  return {k: v.detach().float().numpy() for k, v in sd.items() if hasattr(v, "detach")}


def _read_weights(path: str) -> tuple[dict, list[str]]:
  """All tensors of the checkpoint in `path` (float32 numpy) and the files read."""
  for name, reader in (("model.safetensors", _read_safetensors), ("pytorch_model.bin", _read_torch)):
    index = os.path.join(path, name + ".index.json")
    if os.path.exists(index):
      weight_map = read_json(index, 'a sharded checkpoint index {"weight_map": {tensor: file}}').get("weight_map")
      if not isinstance(weight_map, dict):
        raise errors.DataError(f'{index}: no "weight_map" object; expected {{"weight_map": {{tensor: file}}}}')
      files = sorted(set(weight_map.values()))
      absent = [fn for fn in files if not os.path.isfile(os.path.join(path, fn))]
      if absent:
        raise errors.MissingInputError(f"{index} names shard(s) {', '.join(absent)} that do not exist in {path}")
    elif os.path.exists(os.path.join(path, name)):
      files = [name]
    else:
      continue
    sd = {}
    for fn in files:
      sd.update(reader(os.path.join(path, fn)))
    return {k: np.asarray(v, np.float32) for k, v in sd.items()}, files
  raise errors.MissingInputError(f"no model.safetensors or pytorch_model.bin (or sharded *.index.json) in {path}")


# ------------------------------------------------------------------- loading


@dataclasses.dataclass
class LoadReport:
  source: str                                            # resolved directory
  files: list[str]                                       # weight files read
  model_type: str = ""                                   # config.json's model_type
  fresh: list[str] = dataclasses.field(default_factory=list)    # our subtrees freshly initialised
  ignored: list[str] = dataclasses.field(default_factory=list)  # checkpoint keys deliberately dropped


def abstract_params(config: TransformerConfig, cross_attention: bool = False) -> dict:
  """`TransformerEncoder`'s param tree as plain `jax.ShapeDtypeStruct`s (`cross_attention`: a VECO stack's)."""
  from xtreme_jax.networks.veco import VecoNetwork  # pylint: disable=g-import-not-at-top
  ids = jnp.zeros((1, 1), jnp.int32)
  network = VecoNetwork if cross_attention else TransformerEncoder
  shapes = jax.eval_shape(lambda: network(config).init(jax.random.PRNGKey(0), ids, ids, method=network.init_all))
  return nn.unbox(shapes)["params"]


def _fresh(path: str, shape: tuple) -> np.ndarray:
  """Deterministic init as the network's: normal(0.02) kernels, LN ones, zero biases."""
  leaf = path.rsplit("/", 1)[-1]
  if leaf in ("kernel", "embedding"):
    rng = np.random.default_rng(zlib.crc32(path.encode()))
    return (0.02 * rng.standard_normal(shape)).astype(np.float32)
  return (np.ones if leaf == "scale" else np.zeros)(shape, np.float32)


def _normalise(sd: dict, family: str) -> tuple[dict, dict]:
  """Strip the base-model prefix, gamma/beta -> weight/bias. Returns (tensors, normalised -> original name)."""
  out, orig = {}, {}
  for k, v in sd.items():
    n = k[len(family) + 1:] if k.startswith(family + ".") else k
    n = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", n))
    out[n], orig[n] = v, k
  return out, orig


def load_with_report(src: str, *, scan_layers: bool = False,
                     dtype: str = "float32") -> tuple[TransformerConfig, dict, LoadReport]:
  """`load`, plus a `LoadReport` naming freshly-initialised parts and ignored keys."""
  path = _resolve(src)
  hf_config, config = _read_hf_config(path)
  family = _FAMILY[hf_config["model_type"]]
  raw, files = _read_weights(path)
  sd, orig = _normalise(raw, family)
  config = config.replace(dtype=dtype, tie_word_embeddings=_tied(config, sd, family, orig))
  has_prefix = any(k.startswith(family + ".") for k in raw)
  hf_name = lambda n: f"{family}.{n}" if has_prefix and not n.startswith(("cls.", "lm_head.")) else n  # noqa: E731

  expected = nested.flatten(abstract_params(config), "/")
  table = [row for row in _table(config, family) if row[1] in expected]
  assert {o for _, o, _ in table} == set(expected), "mapping table out of sync with TransformerEncoder"

  flat, used, missing, misshaped, absent = _converted(table, expected, sd, orig)
  report = LoadReport(source=path, files=files, model_type=hf_config["model_type"])
  for part, rows in absent.items():
    n_rows = sum(o.split("/")[0] == part for _, o, _ in table)
    if len(rows) == n_rows:  # wholly absent: initialise afresh
      report.fresh.append(part)
      flat.update({ours: _fresh(ours, shape) for _, _, ours, shape in rows})
    else:
      missing += rows

  report.ignored, unexpected = _leftovers(sd, used, orig)
  if missing or unexpected or misshaped:
    groups = [("missing", [f"{hf_name(h)} expected {w}" for h, w, _, _ in missing]),
              ("unexpected", unexpected), ("mis-shaped", misshaped)]
    raise CheckpointMismatchError(
        f"checkpoint {path} does not match its {hf_config['model_type']} config: {_listing(groups)}")

  for part in report.fresh:
    logger.info("%s: no %s weights in the checkpoint; freshly initialised", path, part)
  params = nested.unflatten(flat, "/")
  if scan_layers:
    config, params = _scanned(config, params)
  return config, params, report


def _converted(table: list, expected: dict, sd: dict, orig: dict) -> tuple[dict, set, list, list, dict]:
  """The checkpoint's arrays (`sd`) in our layout by the mapping `table`: (our flat parameters, the names used,
  missing rows, mis-shaped lines, the absent rows of each optional part)."""
  flat, used, missing, misshaped = {}, set(), [], []
  absent = {part: [] for part in _OPTIONAL}
  for hf, ours, conv in table:
    shape = tuple(expected[ours].shape)
    want = conv.hf_shape(shape)
    if hf not in sd:
      part = ours.split("/")[0]
      (absent[part] if part in absent else missing).append((hf, want, ours, shape))
      continue
    used.add(hf)
    if tuple(sd[hf].shape) != want:
      misshaped.append(f"{orig[hf]}: checkpoint {tuple(sd[hf].shape)}, expected {want}")
    else:
      flat[ours] = conv.convert(sd[hf], shape)
  return flat, used, missing, misshaped, absent


def _leftovers(sd: dict, used: set, orig: dict) -> tuple[list, list]:
  """The checkpoint's arrays the table did not use: (ignored: known extras and duplicates of the head's bias;
  unexpected: the others, with their shapes)."""
  ignored, unexpected = [], []
  for n in sorted(set(sd) - used):
    head_bias = _DUPLICATE_BIAS.get(n)
    if any(re.search(p, n) for p in _IGNORABLE) or (
        head_bias in sd and sd[head_bias].shape == sd[n].shape and np.array_equal(sd[head_bias], sd[n])):
      ignored.append(orig[n])
    else:
      unexpected.append(f"{orig[n]} {tuple(sd[n].shape)}")
  return ignored, unexpected


def _scanned(config: TransformerConfig, params: dict) -> tuple[TransformerConfig, dict]:
  """The parameters with the encoder's layers stacked for `scan_layers`."""
  config = config.replace(scan_layers=True)
  params["encoder"] = jax.tree_util.tree_map(np.asarray, stack_layer_params(params["encoder"], config.num_layers))
  want_shapes = jax.tree_util.tree_map(lambda s: tuple(s.shape), abstract_params(config))
  got_shapes = jax.tree_util.tree_map(lambda a: tuple(a.shape), params)
  assert want_shapes == got_shapes, "scanned layout does not match TransformerEncoder"
  return config, params


def _tied(config: TransformerConfig, sd: dict, family: str, orig: dict) -> bool:
  """Whether the MLM output layer is the word embeddings.

  As the config says, unless the checkpoint's decoder weight differs from
  the word embeddings: transformers 5.x then loads it untied, and so do we.
  """
  decoder, words = sd.get(_DECODER[family]), sd.get("embeddings.word_embeddings.weight")
  if not config.tie_word_embeddings or decoder is None or words is None:
    return config.tie_word_embeddings
  if decoder.shape == words.shape and np.array_equal(decoder, words):
    return True
  logger.info("%s differs from the word embeddings: imported as an untied output layer "
              "(tie_word_embeddings=False), as transformers loads it", orig[_DECODER[family]])
  return False


def _listing(groups: list[tuple[str, list[str]]]) -> str:
  """'title (n): a; b; ... and k more; title2 (m): ...' over the non-empty groups (one line)."""
  parts = []
  for title, items in groups:
    if items:
      more = f"; ... and {len(items) - _MAX_LISTED} more" if len(items) > _MAX_LISTED else ""
      parts.append(f"{title} ({len(items)}): " + "; ".join(items[:_MAX_LISTED]) + more)
  return "; ".join(parts)


def load(src: str, *, scan_layers: bool = False, dtype: str = "float32") -> tuple[TransformerConfig, dict]:
  """(config, params) for an HF checkpoint directory or hub id; params are float32 numpy, whatever the checkpoint
  stores; `dtype` names the config's precision policy (`networks/precision.py`)."""
  config, params, _ = load_with_report(src, scan_layers=scan_layers, dtype=dtype)
  return config, params


# ---------------------------------------------------------------- save / CLI


def refuse_non_empty(out_dir: str) -> None:
  if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or os.listdir(out_dir)):
    raise OutputExistsError(f"{out_dir} already exists and is not empty; refusing to overwrite it "
                            "(give a new or empty directory)")


def write_directory(out_dir: str, write: Callable[[str], None]) -> None:
  """`write(tmp)` into a temporary sibling of `out_dir`, then rename it to `out_dir` (absent or empty).

  A failed or killed write never leaves a half-written `out_dir`; a failed
  one removes the temporary directory, and the ones killed writes of
  `out_dir` left (`.<name>.<random>.tmp`) are removed before writing.
  """
  out_dir = os.path.abspath(out_dir)
  refuse_non_empty(out_dir)
  parent, name = os.path.split(out_dir)
  removed = atomic.remove_stale_siblings(out_dir)
  if removed:
    logger.warning("removed %s, left by an interrupted write of %s", ", ".join(removed), out_dir)
  os.makedirs(parent, exist_ok=True)
  tmp = tempfile.mkdtemp(dir=parent, prefix=f".{name}.", suffix=".tmp")
  try:
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp creates 0700
    write(tmp)
    os.replace(tmp, out_dir)  # replaces an empty directory
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise


def save_imported(out_dir: str, config: TransformerConfig, params: dict) -> None:
  """Write `out_dir/params` (orbax) and `out_dir/config.json`, all or nothing; refuses a non-empty `out_dir`."""
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top

  def write(tmp: str) -> None:
    with ocp.StandardCheckpointer() as ckptr:
      ckptr.save(os.path.join(tmp, "params"), params)
    atomic.write_text(os.path.join(tmp, "config.json"), config.to_json())

  write_directory(out_dir, write)


IMPORTED = "an `xtreme-jax import-hf` / `export-encoder` / `export-veco` / `export-seq2seq` output (config.json + params)"


def imported_config(path: str) -> TransformerConfig:
  """The config of a `save_imported` folder (its config.json alone: no parameter is read)."""
  config_path = os.path.join(fs.abspath(path), "config.json")
  config_dict = read_json(config_path, IMPORTED)
  try:
    return TransformerConfig.from_dict(config_dict)
  except errors.UserError as e:
    raise type(e)(f"{config_path}: {e}") from e
  except (TypeError, ValueError) as e:
    raise errors.DataError(f"{config_path}: {e}") from e


def load_imported(path: str) -> tuple[TransformerConfig, dict]:
  """(config, params) written by `save_imported`; params are numpy float32."""
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top
  path = fs.abspath(path)
  what = IMPORTED
  config = imported_config(path)
  if not fs.isdir(os.path.join(path, "params")):
    raise errors.MissingInputError(f"{os.path.join(path, 'params')} does not exist; expected {what}")
  with ocp.StandardCheckpointer() as ckptr:
    stored = ckptr.metadata(os.path.join(path, "params")).item_metadata.tree
    if "decoder" in stored:  # `export-seq2seq`: an encoder-decoder, restored as stored
      target = jax.tree_util.tree_map(lambda m: jax.ShapeDtypeStruct(tuple(m.shape), m.dtype), stored)
    else:
      veco = "cross_attention" in stored.get("encoder", {}).get("layers_0", {})  # `export-veco`: the whole stack
      target = abstract_params(config, cross_attention=veco)
    params = ckptr.restore(os.path.join(path, "params"), target)
  return config, jax.tree_util.tree_map(np.asarray, params)


def import_hf(src: str, out_dir: str, *, scan_layers: bool = False) -> None:
  """Load an HF checkpoint, save it with `save_imported`, print a one-line summary."""
  refuse_non_empty(os.path.abspath(out_dir))
  config, params, report = load_with_report(src, scan_layers=scan_layers)
  save_imported(out_dir, config, params)
  n = sum(x.size for x in jax.tree_util.tree_leaves(params))
  head = "" if config.tie_word_embeddings else ", untied MLM output layer"
  print(f"imported {report.model_type} {src} -> {out_dir}: {config.num_layers} layers, hidden {config.hidden_size}, "
        f"vocab {config.vocab_size}, {n:,} parameters{head}, freshly initialised: {', '.join(report.fresh) or 'none'}")


def cli_import_hf(argv: Optional[list[str]] = None) -> int:
  """`xtreme-jax import-hf SRC OUT [--scan_layers]`."""
  parser = errors.ArgumentParser(
      prog="xtreme-jax import-hf",
      description="Convert a Hugging Face BERT / RoBERTa / XLM-R checkpoint to xtreme_jax params.")
  parser.add_argument("src", metavar="SRC", help="local checkpoint directory or hub id")
  parser.add_argument("out", metavar="OUT", help="new (or empty) output directory")
  parser.add_argument("--scan_layers", action="store_true", help="store layers stacked for nn.scan")
  args = parser.parse_args(argv)
  import_hf(args.src, args.out, scan_layers=args.scan_layers)
  return 0
