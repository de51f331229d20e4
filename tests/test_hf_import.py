"""Hugging Face checkpoint import (`xtreme_jax.hf`): parity with transformers, key accounting, round trip.

Offline and CPU-only: tiny random BERT / XLM-R models are saved with
`save_pretrained` and used as the reference.
"""

import json
import logging
import os
import sys

import jax
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from safetensors.torch import load_file, save_file  # noqa: E402

from xtreme_jax import cli, errors, hf  # noqa: E402
from xtreme_jax.networks.encoder import TransformerEncoder  # noqa: E402

TIER = "integration"  # conftest.py: this file's tier

transformers.logging.set_verbosity_error()

TOL = 1e-5
LENGTHS = (7, 4, 1)  # tokens per example, before the two specials
KINDS = {
    # kind: (config class, MLM class, base class, base prefix, extra config)
    "bert": ("BertConfig", "BertForMaskedLM", "BertModel", "bert", dict(num_hidden_layers=2)),
    "xlmr": ("XLMRobertaConfig", "XLMRobertaForMaskedLM", "XLMRobertaModel", "roberta",
             dict(num_hidden_layers=3, max_position_embeddings=20, type_vocab_size=1, layer_norm_eps=1e-5,
                  pad_token_id=1, bos_token_id=0, eos_token_id=2)),
}


def _classes(kind):
  return [getattr(transformers, n) for n in KINDS[kind][:3]]


def make_checkpoint(kind, path, *, fmt="safetensors", pooler=True, seed=0, **config_changes):
  """Save a tiny random *ForMaskedLM (plus pooler weights, as real checkpoints have) to `path`."""
  config_cls, mlm_cls, _ = _classes(kind)
  prefix, extra = KINDS[kind][3], KINDS[kind][4]
  torch.manual_seed(seed)
  config = config_cls(vocab_size=99, hidden_size=32, num_attention_heads=4, intermediate_size=37,
                      attn_implementation="eager", **{**extra, **config_changes})
  mlm_cls(config).eval().save_pretrained(path, safe_serialization=True)
  st = os.path.join(path, "model.safetensors")
  sd = load_file(st)
  if pooler:
    sd[f"{prefix}.pooler.dense.weight"] = 0.1 * torch.randn(32, 32)
    sd[f"{prefix}.pooler.dense.bias"] = 0.1 * torch.randn(32)
  write_state_dict(path, sd, fmt)
  return str(path)


def write_state_dict(path, sd, fmt="safetensors"):
  st = os.path.join(path, "model.safetensors")
  if os.path.exists(st):
    os.remove(st)
  if fmt == "safetensors":
    save_file({k: v.contiguous() for k, v in sd.items()}, st, metadata={"format": "pt"})
  else:
    torch.save(sd, os.path.join(path, "pytorch_model.bin"))


def batch(kind):
  """A padded batch of unequal lengths (with specials) and, for BERT, two segments."""
  cls_id, sep_id, pad = (2, 3, 0) if kind == "bert" else (0, 2, 1)
  rng = np.random.RandomState(0)
  width = max(LENGTHS) + 2
  ids = np.full((len(LENGTHS), width), pad, np.int32)
  mask = np.zeros_like(ids)
  types = np.zeros_like(ids)
  for b, n in enumerate(LENGTHS):
    ids[b, :n + 2] = [cls_id, *rng.randint(5, 99, n), sep_id]
    mask[b, :n + 2] = 1
    if kind == "bert":
      types[b, (n + 2) // 2:n + 2] = 1
  return ids, mask, types


def hf_reference(kind, path, ids, mask, types):
  _, mlm_cls, base_cls = _classes(kind)
  kw = dict(input_ids=torch.tensor(ids, dtype=torch.long), attention_mask=torch.tensor(mask, dtype=torch.long))
  if kind == "bert":
    kw["token_type_ids"] = torch.tensor(types, dtype=torch.long)
  with torch.no_grad():
    base = base_cls.from_pretrained(path, attn_implementation="eager").eval()(**kw)
    logits = mlm_cls.from_pretrained(path, attn_implementation="eager").eval()(**kw).logits
  return base.last_hidden_state.numpy(), base.pooler_output.numpy(), logits.numpy()


def ours(config, params, ids, mask, types):
  model = TransformerEncoder(config)
  out = model.apply({"params": params}, ids, mask, types)
  logits = model.apply({"params": params}, out.sequence, method=TransformerEncoder.mlm_logits)
  return np.asarray(out.sequence), np.asarray(out.pooled), np.asarray(logits)


def max_diffs(kind, path, config, params):
  """Max |ours - transformers| over every position, padding included."""
  ids, mask, types = batch(kind)
  ref = hf_reference(kind, path, ids, mask, types)
  got = ours(config, params, ids, mask, types)
  return {"sequence": np.abs(got[0] - ref[0]).max(), "pooled": np.abs(got[1] - ref[1]).max(),
          "mlm_logits": np.abs(got[2] - ref[2]).max()}


@pytest.mark.parametrize("kind,fmt,scan", [
    ("bert", "safetensors", False),
    ("xlmr", "safetensors", False),
    ("bert", "bin", False),
    ("xlmr", "safetensors", True),
])
def test_parity_with_transformers(tmp_path, kind, fmt, scan):
  path = make_checkpoint(kind, tmp_path, fmt=fmt)
  config, params = hf.load(path, scan_layers=scan)
  assert config.scan_layers == scan and config.num_layers == KINDS[kind][4]["num_hidden_layers"]
  if kind == "xlmr":
    assert (config.position_style, config.pad_token_id, config.max_positions, config.type_vocab_size,
            config.layer_norm_eps) == ("roberta", 1, 20, 1, 1e-5)
  else:
    assert (config.position_style, config.layer_norm_eps) == ("absolute", 1e-12)
  leaves = jax.tree_util.tree_leaves(params)
  assert all(type(x) is np.ndarray and x.dtype == np.float32 for x in leaves)
  d = max_diffs(kind, path, config, params)
  print(kind, fmt, "scan" if scan else "unrolled", {k: f"{v:.2e}" for k, v in d.items()})
  assert d["sequence"] < TOL and d["pooled"] < TOL and d["mlm_logits"] < TOL, d


def test_saved_base_model_without_prefix_or_head(tmp_path):
  """A saved `BertModel`: no `bert.` prefix, has the pooler, no MLM head -> head freshly initialised."""
  make_checkpoint("bert", tmp_path / "mlm")
  _, _, base_cls = _classes("bert")
  base_cls.from_pretrained(tmp_path / "mlm").save_pretrained(tmp_path / "base")
  assert "embeddings.word_embeddings.weight" in load_file(tmp_path / "base" / "model.safetensors")
  config, params, report = hf.load_with_report(str(tmp_path / "base"))
  assert report.fresh == ["mlm_head"]
  d = max_diffs("bert", str(tmp_path / "mlm"), config, params)
  assert d["sequence"] < TOL and d["pooled"] < TOL


def test_missing_pooler_is_freshly_initialised_and_reported(tmp_path, caplog):
  path = make_checkpoint("xlmr", tmp_path, pooler=False)
  with caplog.at_level(logging.INFO, logger="xtreme_jax.hf"):
    config, params, report = hf.load_with_report(path)
  assert report.fresh == ["pooler"]
  assert any("pooler" in r.getMessage() and "freshly initialised" in r.getMessage() for r in caplog.records)
  kernel, bias = params["pooler"]["dense"]["kernel"], params["pooler"]["dense"]["bias"]
  assert kernel.shape == (32, 32) and 0.01 < kernel.std() < 0.03 and not bias.any()
  np.testing.assert_array_equal(kernel, hf.load(path)[1]["pooler"]["dense"]["kernel"])  # deterministic
  d = max_diffs("xlmr", path, config, params)
  assert d["sequence"] < TOL and d["mlm_logits"] < TOL


def test_ignorable_keys(tmp_path):
  path = make_checkpoint("bert", tmp_path)
  sd = load_file(os.path.join(path, "model.safetensors"))
  sd["bert.embeddings.position_ids"] = torch.arange(512)[None]
  sd["cls.seq_relationship.weight"] = torch.zeros(2, 32)
  sd["cls.predictions.decoder.weight"] = sd["bert.embeddings.word_embeddings.weight"].clone()
  sd["cls.predictions.decoder.bias"] = sd["cls.predictions.bias"].clone()
  write_state_dict(path, sd)
  _, _, report = hf.load_with_report(path)
  assert sorted(report.ignored) == sorted(["bert.embeddings.position_ids", "cls.seq_relationship.weight",
                                           "cls.predictions.decoder.weight", "cls.predictions.decoder.bias"])
  sd["cls.predictions.decoder.bias"] = sd["cls.predictions.bias"] + 1.0  # no longer a duplicate
  write_state_dict(path, sd)
  with pytest.raises(hf.CheckpointMismatchError, match=r"unexpected \(1\)"):
    hf.load(path)


def test_mismatches_are_reported_together(tmp_path):
  path = make_checkpoint("bert", tmp_path, fmt="bin")
  bin_path = os.path.join(path, "pytorch_model.bin")
  sd = torch.load(bin_path, weights_only=True)
  del sd["bert.encoder.layer.1.attention.self.query.weight"]
  sd["bert.encoder.layer.0.attention.self.rotary.weight"] = torch.zeros(3, 4)
  sd["bert.encoder.layer.0.intermediate.dense.weight"] = torch.zeros(36, 32)
  torch.save(sd, bin_path)
  with pytest.raises(hf.CheckpointMismatchError) as err:
    hf.load(path)
  msg = str(err.value)
  assert isinstance(err.value, ValueError) and isinstance(err.value, errors.UserError)
  assert "\n" not in msg and msg.startswith(f"checkpoint {path} does not match its bert config: missing (1): ")
  for needle in ("missing (1)", "bert.encoder.layer.1.attention.self.query.weight expected (32, 32)",
                 "unexpected (1)", "bert.encoder.layer.0.attention.self.rotary.weight (3, 4)",
                 "mis-shaped (1)", "bert.encoder.layer.0.intermediate.dense.weight: checkpoint (36, 32), "
                 "expected (37, 32)"):
    assert needle in msg, msg


def test_unsupported_hidden_act(tmp_path):
  with pytest.raises(ValueError, match="hidden_act 'gelu_new'"):
    hf.config_from_hf({"model_type": "bert", "hidden_act": "gelu_new", "vocab_size": 9, "hidden_size": 8,
                       "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8,
                       "max_position_embeddings": 8})
  path = make_checkpoint("xlmr", tmp_path)
  cfg = json.loads((tmp_path / "config.json").read_text())
  (tmp_path / "config.json").write_text(json.dumps({**cfg, "hidden_act": "relu"}))
  with pytest.raises(ValueError, match="hidden_act 'relu'"):
    hf.load(path)


def test_missing_source_does_not_touch_the_network(tmp_path, monkeypatch):
  huggingface_hub = pytest.importorskip("huggingface_hub")
  monkeypatch.setenv("HF_HUB_OFFLINE", "1")
  calls = []

  def offline(repo_id, **kwargs):
    calls.append(repo_id)
    raise OSError("offline")

  monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
  src = str(tmp_path / "no-such-checkpoint")
  with pytest.raises(FileNotFoundError, match="does not exist locally and could not be fetched"):
    hf.load(src)
  assert calls == [src]


def test_import_round_trip_and_cli(tmp_path, capsys):
  src = make_checkpoint("xlmr", tmp_path / "hf", pooler=False)
  out = str(tmp_path / "imported")
  hf.import_hf(src, out)
  summary = capsys.readouterr().out
  assert "xlm-roberta" in summary and "3 layers" in summary and "freshly initialised: pooler" in summary
  config, params = hf.load(src)
  config2, params2 = hf.load_imported(out)
  assert config2 == config
  assert jax.tree_util.tree_structure(params2) == jax.tree_util.tree_structure(params)
  jax.tree_util.tree_map(np.testing.assert_array_equal, params2, params)
  assert all(type(x) is np.ndarray for x in jax.tree_util.tree_leaves(params2))

  with pytest.raises(FileExistsError, match="refusing to overwrite"):
    hf.import_hf(src, out)

  out2 = str(tmp_path / "scanned")
  assert hf.cli_import_hf([src, out2, "--scan_layers"]) == 0
  assert sorted(os.listdir(out2)) == ["config.json", "params"]
  config3, params3 = hf.load_imported(out2)
  assert config3 == config.replace(scan_layers=True)
  np.testing.assert_array_equal(params3["encoder"]["layers"]["layer"]["feed_forward"]["output"]["kernel"][2],
                                params["encoder"]["layers_2"]["feed_forward"]["output"]["kernel"])


def _cli_error(capsys, *argv):
  """Runs `xtreme-jax import-hf ...`; returns its one-line stderr (exit code 2)."""
  capsys.readouterr()
  assert cli.main(["import-hf", *map(str, argv)]) == 2
  err = capsys.readouterr().err
  assert len(err.splitlines()) == 1 and err.startswith("error: "), err
  return err.strip()


@pytest.mark.parametrize("kind,flag", [("bert", False), ("xlmr", False), ("bert", True), ("xlmr", True)])
def test_untied_output_layer_is_imported(tmp_path, kind, flag):
  """tie_word_embeddings=False, or (flag True) a decoder weight that differs from the word embeddings, which
  transformers 5.x loads untied too: the logits equal HF's, and the kernel survives save / load."""
  if flag and int(transformers.__version__.split(".")[0]) < 5:
    pytest.skip("transformers 4.x re-ties a distinct decoder weight on load; 5.x keeps it (as we do)")
  path = make_checkpoint(kind, tmp_path / "hf", tie_word_embeddings=flag)
  if flag:
    st = os.path.join(path, "model.safetensors")
    sd = load_file(st)
    decoder = {"bert": "cls.predictions.decoder.weight", "xlmr": "lm_head.decoder.weight"}[kind]
    assert decoder not in sd  # tied: save_pretrained drops it
    sd[decoder] = 0.1 * torch.randn(99, 32)
    write_state_dict(path, sd)
  config, params = hf.load(path)
  assert not config.tie_word_embeddings and params["mlm_head"]["decoder"]["kernel"].shape == (32, 99)
  d = max_diffs(kind, path, config, params)
  assert d["sequence"] < TOL and d["mlm_logits"] < TOL, d
  hf.import_hf(path, tmp_path / "out")
  config2, params2 = hf.load_imported(str(tmp_path / "out"))
  assert config2 == config
  np.testing.assert_array_equal(params2["mlm_head"]["decoder"]["kernel"], params["mlm_head"]["decoder"]["kernel"])


def test_import_errors_are_one_line_naming_the_file(tmp_path, capsys):
  src = make_checkpoint("xlmr", tmp_path / "hf")
  config_json, st = tmp_path / "hf" / "config.json", tmp_path / "hf" / "model.safetensors"
  out = tmp_path / "out"
  good_config, weights = config_json.read_text(), st.read_bytes()

  st.write_bytes(weights[:len(weights) // 2])  # truncated download
  err = _cli_error(capsys, src, out)
  assert f"{st}: not a readable safetensors file" in err and "expected a complete model.safetensors" in err
  st.write_bytes(weights)

  config_json.write_text(good_config.replace('"hidden_act"', '"hidden_act" "'))  # malformed JSON
  err = _cli_error(capsys, src, out)
  assert f"error: {config_json}:" in err and "malformed JSON" in err and "expected the checkpoint's config.json" in err
  config_json.write_text(json.dumps({k: v for k, v in json.loads(good_config).items() if k != "vocab_size"}))
  assert f"error: {config_json}: the xlm-roberta config lacks vocab_size" in _cli_error(capsys, src, out)
  config_json.write_text(json.dumps({**json.loads(good_config), "model_type": "gpt2"}))
  assert f"error: {config_json}: unsupported model_type 'gpt2'" in _cli_error(capsys, src, out)
  config_json.unlink()
  assert f"error: {config_json} does not exist" in _cli_error(capsys, src, out)
  config_json.write_text(good_config)
  assert not out.exists()

  sd = load_file(st)
  sd["roberta.encoder.layer.0.output.dense.weight"] = torch.zeros(32, 36)  # mis-shaped: nothing is written
  for i in range(10):
    sd[f"roberta.extra.{i}.weight"] = torch.zeros(1)
  write_state_dict(src, sd)
  err = _cli_error(capsys, src, out)
  assert f"checkpoint {src} does not match its xlm-roberta config: unexpected (10): roberta.extra.0.weight (1,)" \
      in err and "; ... and 2 more; mis-shaped (1): " in err
  assert not out.exists()

  out.mkdir()
  (out / "keep.txt").write_text("x")
  err = _cli_error(capsys, src, out)
  assert err == f"error: {out} already exists and is not empty; refusing to overwrite it (give a new or empty " \
                "directory)"


def test_import_is_all_or_nothing(tmp_path, monkeypatch):
  src = make_checkpoint("bert", tmp_path / "hf")
  (tmp_path / "out").mkdir()  # an existing empty OUT is fine
  hf.import_hf(src, tmp_path / "out")
  names = [n for _, dirs, files in os.walk(tmp_path) for n in dirs + files]
  assert not [n for n in names if "tmp" in n], names
  assert sorted(os.listdir(tmp_path)) == ["hf", "out"] and "config.json" in os.listdir(tmp_path / "out")

  def killed(path, text):  # the import dies after the params are written, before config.json
    raise KeyboardInterrupt

  monkeypatch.setattr(hf.atomic, "write_text", killed)
  (tmp_path / "empty").mkdir()
  for out in ("empty", "new"):
    with pytest.raises(KeyboardInterrupt):
      hf.import_hf(src, tmp_path / out)
  assert sorted(os.listdir(tmp_path)) == ["empty", "hf", "out"] and not os.listdir(tmp_path / "empty")


def test_killed_writes_leave_nothing_the_next_write_keeps(tmp_path, caplog):
  """A SIGKILL mid-import leaves `.OUT.<random>.tmp/`; the next import or export of OUT removes it (only it)."""
  stale = [tmp_path / ".out.k2j4h5g6.tmp", tmp_path / ".out.ab_12345.tmp"]  # tempfile.mkdtemp's names
  (stale[0] / "params").mkdir(parents=True)
  (stale[0] / "params" / "half").write_text("x")
  stale[1].mkdir()
  others = [".out.k2j4h5g6.tmp.bak", ".outer.k2j4h5g6.tmp", ".out.short.tmp", "out.k2j4h5g6.tmp"]
  for name in others:
    (tmp_path / name).write_text("not ours")

  def write(tmp):
    with open(os.path.join(tmp, "config.json"), "w") as f:
      f.write("{}")

  with caplog.at_level(logging.WARNING, logger="xtreme_jax.hf"):
    hf.write_directory(str(tmp_path / "out"), write)
  assert sorted(os.listdir(tmp_path)) == sorted(others + ["out"])
  assert os.listdir(tmp_path / "out") == ["config.json"]
  assert all(str(p) in caplog.text for p in stale)


def test_import_hf_command_line_errors_are_one_line(capsys):
  err = _cli_error(capsys)  # no SRC / OUT
  assert err == "error: xtreme-jax import-hf: the following arguments are required: SRC, OUT (see xtreme-jax " \
                "import-hf --help)"
  assert _cli_error(capsys, "a", "b", "--scan-layer").startswith(
      "error: xtreme-jax import-hf: unrecognized arguments: --scan-layer")


def test_pytorch_checkpoint_without_torch_says_how_to_install_it(tmp_path, monkeypatch):
  src = make_checkpoint("bert", tmp_path, fmt="bin")
  monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails
  bin_path = os.path.join(src, "pytorch_model.bin")
  with pytest.raises(errors.UserError) as err:
    hf.load(src)
  assert str(err.value) == (f"{bin_path} is a PyTorch pickle; reading it needs torch: pip install "
                            "'xtreme-jax[torch]' (or convert the checkpoint to model.safetensors)")
