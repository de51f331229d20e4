"""FILTER's encoder, heads and losses (networks/filter.py, models/filter.py) on the tiny preset."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import TINY

from xtreme_jax import errors
from xtreme_jax.models import filter as filter_models
from xtreme_jax.models.classification import ClassifierNetwork
from xtreme_jax.networks.encoder import TransformerEncoder
from xtreme_jax.networks.filter import FilterEncoder

TIER = "integration"  # conftest.py: this file's tier

CONFIGS = {"unrolled": TINY.replace(dropout_rate=0.0, attention_dropout_rate=0.0),
           "scanned": TINY.replace(dropout_rate=0.0, attention_dropout_rate=0.0, scan_layers=True),
           "roberta": TINY.replace(dropout_rate=0.0, attention_dropout_rate=0.0, position_style="roberta",
                                   pad_token_id=1, type_vocab_size=1, max_positions=24)}


def _side(rng, batch, length, lengths):
  ids = rng.integers(5, 60, (batch, length)).astype(np.int32)
  mask = (np.arange(length)[None] < np.asarray(lengths)[:, None]).astype(np.int32)
  return np.where(mask, ids, 1).astype(np.int32), mask


@pytest.fixture(scope="module")
def pair():
  rng = np.random.default_rng(0)
  return _side(rng, 3, 7, [7, 4, 2]), _side(rng, 3, 5, [3, 5, 1])


def _encoder_params(config, ids, mask):
  return TransformerEncoder(config).init(jax.random.PRNGKey(3), ids, mask, method=TransformerEncoder.init_all)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_m_equal_depth_is_each_side_alone_and_k_equal_depth_is_the_concatenation(name, pair):
  config = CONFIGS[name]
  (s_ids, s_mask), (t_ids, t_mask) = pair
  params = _encoder_params(config, s_ids, s_mask)
  alone = lambda ids, mask: TransformerEncoder(config).apply(params, ids, mask).sequence  # noqa: E731

  local = FilterEncoder(config, local_layers=config.num_layers, fusion_layers=0).apply(params, s_ids, s_mask, t_ids,
                                                                                       t_mask)
  np.testing.assert_allclose(local.source, alone(s_ids, s_mask), atol=1e-5)
  np.testing.assert_allclose(local.target, alone(t_ids, t_mask), atol=1e-5)

  fused = FilterEncoder(config, local_layers=0, fusion_layers=config.num_layers).apply(params, s_ids, s_mask, t_ids,
                                                                                       t_mask)
  ids, mask = np.concatenate([s_ids, t_ids], 1), np.concatenate([s_mask, t_mask], 1)
  emb = lambda i, m: TransformerEncoder(config).apply(params, i, m, method=lambda mod, i, m: mod.embeddings(  # noqa: E731
      i, m, None, None, deterministic=True))
  # the concatenated pair with each side's own positions: the encoder's layers over the two sides' embeddings
  x = jnp.concatenate([emb(s_ids, s_mask), emb(t_ids, t_mask)], axis=1)
  concat = TransformerEncoder(config).apply(params, x, mask, method=lambda mod, x, m: mod.encoder(x, m)[0])
  np.testing.assert_allclose(np.concatenate([fused.source, fused.target], 1), concat, atol=1e-5)
  if config.position_style != "roberta":  # absolute positions restarting on the target side, through the API
    positions = np.concatenate([np.tile(np.arange(7), (3, 1)), np.tile(np.arange(5), (3, 1))], 1)
    api = TransformerEncoder(config).apply(params, ids, mask, None, positions).sequence
    np.testing.assert_allclose(concat, api, atol=1e-5)

  middle = FilterEncoder(config, local_layers=1, fusion_layers=1).apply(params, s_ids, s_mask, t_ids, t_mask)
  assert not np.allclose(middle.target, local.target, atol=1e-3)  # the fusion layer lets the sides meet


def test_depths_beyond_the_backbone_are_refused():
  with pytest.raises(errors.ConfigError, match=r"m \+ k <= 2 \(the backbone's layers\)"):
    filter_models.FilterClassificationModel(TINY, local_layers=2, fusion_layers=1)
  with pytest.raises(errors.ConfigError, match="kl_weight = 1.5"):
    filter_models.FilterClassificationModel(TINY, kl_weight=1.5)


def _batch(pair, labels=(0, 2, 1)):
  (s_ids, s_mask), (t_ids, t_mask) = pair
  return {"source_input_ids": s_ids, "source_input_mask": s_mask, "input_ids": t_ids, "input_mask": t_mask,
          "labels": np.asarray(labels, np.int32), "example_weights": np.ones(3, np.float32)}


@pytest.mark.parametrize("head", ["pooler", "roberta"])
def test_classification_heads_read_each_sides_own_first_token(head, pair):
  config = CONFIGS["unrolled"]
  model = filter_models.FilterClassificationModel(config, local_layers=config.num_layers, fusion_layers=0,
                                                  num_classes=3, head=head)
  batch = _batch(pair)
  params = model.init(jax.random.PRNGKey(0), batch)
  out = model.predict_batch(params, batch)
  # with no fusion each side is the plain classifier on that side alone: its own first token, its own positions
  plain = ClassifierNetwork(config, 3, head)
  for side, prefix in (("source", "source_"), ("target", "")):
    alone = plain.apply({"params": params}, {"input_ids": batch[f"{prefix}input_ids"],
                                             "input_mask": batch[f"{prefix}input_mask"]})
    np.testing.assert_allclose(out[side], alone, atol=1e-5)


def _np_log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_kl_is_per_distribution_summed_over_classes_times_t_squared():
  teacher = np.asarray([[2.0, 0.0, -1.0], [0.5, 0.5, 3.0]], np.float32)
  student = np.asarray([[0.0, 1.0, 0.0], [1.0, -2.0, 0.0]], np.float32)
  for t in (1.0, 2.0, 0.1):
    p, q = np.exp(_np_log_softmax(teacher / t)), np.exp(_np_log_softmax(student / t))
    hand = [t * t * sum(p[i, c] * np.log(p[i, c] / q[i, c]) for c in range(3)) for i in range(2)]
    np.testing.assert_allclose(filter_models.kl_divergence(teacher, student, t), hand, rtol=1e-5)
  # the first by hand: p = .8438 .1142 .0420, q = .2119 .5761 .2119,
  # .8438 ln(.8438/.2119) + .1142 ln(.1142/.5761) + .0420 ln(.0420/.2119) = 1.1660 - .1848 - .0680
  assert float(filter_models.kl_divergence(teacher, student)[0]) == pytest.approx(0.9132, abs=1e-3)


def test_qa_kl_is_per_window_over_its_own_positions_not_softmaxed_across_the_batch():
  teacher = np.asarray([[3.0, 1.0, 0.0, 9.0], [0.0, 2.0, 1.0, 1.0]], np.float32)
  student = np.asarray([[1.0, 1.0, 1.0, -9.0], [2.0, 0.0, 0.0, 0.0]], np.float32)
  mask = np.asarray([[1, 1, 1, 0], [1, 1, 1, 1]], bool)  # window 0 has 3 positions; position 3 is padding
  ours = np.asarray(filter_models.kl_divergence(teacher, student, 1.0, mask))
  hand = []
  for i, n in enumerate((3, 4)):
    p, q = np.exp(_np_log_softmax(teacher[i, :n])), np.exp(_np_log_softmax(student[i, :n]))
    hand.append(float(np.sum(p * np.log(p / q))))
  np.testing.assert_allclose(ours, hand, rtol=1e-5)
  # the authors' QA KL softmaxes over the whole batch's positions at once: another number
  flat = lambda x: np.exp(_np_log_softmax(np.where(mask, x, -1e9).reshape(-1)))  # noqa: E731
  p, q = flat(teacher), flat(student)
  batch_wide = float(np.sum(np.where(p > 0, p * np.log(np.maximum(p, 1e-30) / np.maximum(q, 1e-30)), 0)))
  assert abs(batch_wide - sum(hand)) > 0.5 and abs(batch_wide - np.mean(hand)) > 0.01


def test_classification_loss_is_eq6_per_example(pair):
  config = CONFIGS["unrolled"]
  batch = _batch(pair)
  teacher = np.asarray([[1.0, 0.0, -1.0], [0.0, 0.0, 2.0], [0.5, 1.5, 0.0]], np.float32)
  outputs = {"source": np.asarray([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], np.float32),
             "target": np.asarray([[0.0, 0.0, 0.0], [1.0, 0.0, 3.0], [0.0, 2.0, 1.0]], np.float32)}
  labels = batch["labels"]
  ce = lambda x: -_np_log_softmax(x)[np.arange(3), labels]  # noqa: E731
  p, q = np.exp(_np_log_softmax(teacher)), np.exp(_np_log_softmax(outputs["target"]))
  kl = np.sum(p * np.log(p / q), -1)
  student = filter_models.FilterClassificationModel(config, kl_weight=0.5)
  loss, sums = student.loss_terms(outputs, {**batch, "teacher_logits": teacher})
  assert float(loss / sums["weight"]) == pytest.approx(np.mean(ce(outputs["source"]) + 0.5 * ce(outputs["target"]) +
                                                               0.5 * kl), rel=1e-5)
  teacher_model = filter_models.FilterClassificationModel(config)  # no KL, both sides' labels
  loss, sums = teacher_model.loss_terms(outputs, batch)
  assert "kl" not in sums
  assert float(loss / sums["weight"]) == pytest.approx(np.mean(ce(outputs["source"]) + ce(outputs["target"])),
                                                       rel=1e-5)


def test_student_losses_at_the_authors_temperatures_by_hand(pair):
  """Classification at T = 0.1 and QA at T = 6: Eq. 6 with T^2 KL(softmax(teacher / T) || softmax(student / T))."""
  config = CONFIGS["unrolled"]
  batch = _batch(pair, labels=(0, -1, 2))  # example 1 has no target label: lambda = 0 there
  teacher = np.asarray([[1.0, 0.0, -1.0], [0.0, 0.2, 0.1], [0.5, 1.5, 0.0]], np.float32)
  outputs = {"source": np.asarray([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], np.float32),
             "target": np.asarray([[0.1, 0.0, 0.0], [0.0, 0.1, 0.0], [0.0, 0.2, 0.1]], np.float32)}
  model = filter_models.FilterClassificationModel(config, kl_weight=0.5, temperature=0.1)
  loss, sums = model.loss_terms(outputs, {**batch, "teacher_logits": teacher})
  # by hand, example 1: p = softmax((0, 2, 1)) = (.0900, .6652, .2447), q = softmax((0, 1, 0)) = (.2119, .5761, .2119);
  # KL = .0900 ln(.0900/.2119) + .6652 ln(.6652/.5761) + .2447 ln(.2447/.2119) = .0538; T^2 KL = .000538
  p, q = np.exp(_np_log_softmax(teacher / 0.1)), np.exp(_np_log_softmax(outputs["target"] / 0.1))
  kl = 0.01 * np.sum(p * np.log(p / q), -1)
  assert kl[1] == pytest.approx(0.000538, abs=1e-6)
  ce = lambda x, y: -_np_log_softmax(x)[np.arange(3), np.maximum(y, 0)] * (y >= 0)  # noqa: E731
  lam = np.asarray([0.5, 0.0, 0.5])
  hand = np.mean(ce(outputs["source"], batch["labels"]) + lam * ce(outputs["target"], batch["labels"]) +
                 (1 - lam) * kl)
  assert float(loss / sums["weight"]) == pytest.approx(hand, rel=1e-5)
  assert float(sums["kl"] / sums["weight"]) == pytest.approx(np.mean((1 - lam) * kl), rel=1e-5)

  qa = filter_models.FilterQaModel(config, kl_weight=0.1, temperature=6.0)
  mask = np.asarray([[1, 1, 1, 0], [1, 1, 1, 1]], np.int32)
  rng = np.random.default_rng(2)
  logits = {k: rng.normal(size=(2, 4)).astype(np.float32) * 4 for k in ("start", "end", "t_start", "t_end")}
  qa_out = {"start_logits": logits["start"], "end_logits": logits["end"],
            "source_start_logits": np.zeros((2, 4), np.float32), "source_end_logits": np.zeros((2, 4), np.float32)}
  qa_batch = {"input_mask": mask, "teacher_start_logits": logits["t_start"], "teacher_end_logits": logits["t_end"],
              "window_weights": np.ones(2, np.float32), "example_weights": np.zeros(2, np.float32),
              "source_example_weights": np.ones(2, np.float32), "start_positions": np.zeros(2, np.int32),
              "end_positions": np.zeros(2, np.int32), "source_start_positions": np.asarray([0, 1]),
              "source_end_positions": np.asarray([1, 2])}
  loss, sums = qa.loss_terms(qa_out, qa_batch)

  def window_kl(t, s, n):
    p, q = np.exp(_np_log_softmax(t[:n] / 6.0)), np.exp(_np_log_softmax(s[:n] / 6.0))
    return 36.0 * np.sum(p * np.log(p / q))
  kl = [(window_kl(logits["t_start"][i], logits["start"][i], n) + window_kl(logits["t_end"][i], logits["end"][i], n))
        / 2 for i, n in enumerate((3, 4))]
  source_ce = np.mean([(np.log(4) + np.log(4)) / 2] * 2)  # zero logits: ln 4 per position distribution
  assert float(loss / sums["weight"]) == pytest.approx(source_ce + np.mean(kl), rel=1e-5)


def test_tagging_student_without_target_tags_is_source_ce_plus_per_token_kl():
  config = CONFIGS["unrolled"]
  rng = np.random.default_rng(1)
  src_logits, tgt_logits, teacher = (rng.normal(size=(1, n, 4)).astype(np.float32) for n in (3, 4, 4))
  batch = {"source_labels": np.asarray([[1, -100, 3]], np.int32), "source_label_weights": np.asarray([[1, 0, 1]]),
           "labels": np.full((1, 4), -100, np.int32), "label_weights": np.asarray([[1, 1, 0, 1]]),
           "teacher_logits": teacher}
  model = filter_models.FilterTaggingModel(config, num_labels=4, kl_weight=1.0)
  loss, sums = model.loss_terms({"source": src_logits, "target": tgt_logits}, batch)
  ce = -_np_log_softmax(src_logits[0])[[0, 2], [1, 3]]
  p, q = np.exp(_np_log_softmax(teacher[0])), np.exp(_np_log_softmax(tgt_logits[0]))
  kl = np.sum(p * np.log(p / q), -1)[[0, 1, 3]]
  assert float(loss / sums["weight"]) == pytest.approx(ce.mean() + kl.mean(), rel=1e-5)


def test_models_train_a_step_from_an_encoder_checkpoint(pair):
  from xtreme_jax.models.base import load_backbone
  config = CONFIGS["scanned"]
  (s_ids, s_mask), (t_ids, t_mask) = pair
  import flax.linen as nn
  pretrained = nn.unbox(_encoder_params(config, s_ids, s_mask)["params"])
  base = _batch(pair)
  tagging = {**base, "source_label_weights": s_mask, "source_labels": np.where(s_mask, 1, -100),
             "label_weights": t_mask, "labels": np.full(t_ids.shape, -100, np.int32)}
  qa = {**base, "source_start_positions": np.asarray([1, 2, 0]), "source_end_positions": np.asarray([2, 3, 0]),
        "start_positions": np.asarray([0, 1, 0]), "end_positions": np.asarray([1, 1, 0]),
        "source_example_weights": np.ones(3, np.float32), "window_weights": np.ones(3, np.float32)}
  for model, batch in ((filter_models.FilterClassificationModel(config, num_classes=3), base),
                       (filter_models.FilterTaggingModel(config, num_labels=4), tagging),
                       (filter_models.FilterQaModel(config, local_layers=0, fusion_layers=2), qa)):
    params = load_backbone(model.init(jax.random.PRNGKey(0), batch), pretrained, config)
    loss, grads = jax.jit(jax.value_and_grad(lambda p: model.loss_fn(p, batch, jax.random.PRNGKey(1))[0]))(params)
    assert np.isfinite(float(loss)) and float(loss) > 0
    assert all(np.all(np.isfinite(g)) for g in jax.tree_util.tree_leaves(grads))


def test_fsdp_filter_step_matches_one_device(tmp_path):
  """On 4 simulated devices (2 x 2 mesh, FSDP), sharded as the encoder: the same loss and update as one device."""
  from xtreme_jax.training.optim import OptimizerConfig
  from xtreme_jax.training.partitioning import PartitionConfig
  from xtreme_jax.training.trainer import Trainer, TrainerConfig
  rng = np.random.default_rng(1)
  batch = _batch((_side(rng, 8, 7, [7, 4, 2, 6, 5, 7, 3, 1]), _side(rng, 8, 5, [3, 5, 1, 2, 5, 4, 4, 2])),
                 labels=(0, 2, 1, 1, 0, 2, 2, 1))
  batch["example_weights"] = np.ones(8, np.float32)
  model = filter_models.FilterClassificationModel(CONFIGS["scanned"], num_classes=3)

  def step(name, mesh, devices):
    trainer = Trainer(model, OptimizerConfig(learning_rate=1e-3), TrainerConfig(train_steps=1, progress_bar=False),
                      PartitionConfig("fsdp" if devices is None else "data_parallel", mesh), str(tmp_path / name),
                      devices=devices)
    state, metrics = trainer.train_step(trainer.init_state(batch), batch)
    return state.params, float(metrics["loss"])

  one, loss_one = step("one", (1, 1), jax.devices()[:1])
  many, loss_many = step("many", (2, 2), None)
  assert loss_many == pytest.approx(loss_one, abs=1e-5)
  leaves = jax.tree_util.tree_leaves(many)
  assert max(len(leaf.sharding.device_set) for leaf in leaves) == 4
  for a, b in zip(jax.tree_util.tree_leaves(one), leaves):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5, rtol=0)
