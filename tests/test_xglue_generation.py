"""XGLUE QG / NTG through the benchmark runner: features, language tags, fine-tuning, beam search, submission."""

import dataclasses

import numpy as np
import pytest

from conftest import TINY
from xtreme_jax import errors
from xtreme_jax.data import paths
from xtreme_jax.data.readers import xglue_readers
from xtreme_jax.data.vocab.vocabularies import load_vocabulary
from xtreme_jax.evaluation import bleu
from xtreme_jax.networks.seq2seq import Seq2SeqConfig
from xtreme_jax.registry import XGLUE
from xtreme_jax.runs import task_kinds, xtreme
from xtreme_jax.training.optim import OptimizerConfig
from xtreme_jax.training.partitioning import PartitionConfig

TIER = "integration"  # conftest.py: this file's tier

SAMPLE = paths.sample_xglue_dir()
GENERATION = task_kinds.GenerationSettings(target_len=8, seq2seq=Seq2SeqConfig(decoder_layers=1), beam_size=2)
RECIPE = xtreme.TaskSettings(epochs=2.0, batch_size=8, seq_len=32, selection="final", generation=GENERATION,
                             optimizer=OptimizerConfig(learning_rate=1e-3))


def test_features_end_targets_with_eos_and_start_the_decoder_with_the_language_tag():
  vocab = load_vocabulary(paths.sample_vocab())
  kind, spec = task_kinds.KINDS["generation"], XGLUE.task("QG")
  examples = [{"id": "a", "source": "The shop sells bread.", "target": "What does the shop sell?", "language": "en"},
              {"id": "b", "source": "Die Insel.", "target": None, "language": "de"}]
  features, owners = kind.features(spec, examples, vocab, RECIPE, training=True)
  assert owners == [0, 1]
  target = vocab.encode("What does the shop sell?")[:7] + [vocab.eos_id]
  np.testing.assert_array_equal(features[0]["targets"], target)
  np.testing.assert_array_equal(features[0]["target_mask"], [1] * 8)
  assert not features[1]["target_mask"].any()  # a hidden test target: nothing to learn, only to decode
  assert [int(f["decoder_start"]) for f in features] == [vocab.bos_id] * 2
  np.testing.assert_array_equal(features[0]["input_ids"][:3], vocab.build_inputs(vocab.encode("The shop"))[0][:3])

  tagged = dataclasses.replace(RECIPE, generation=dataclasses.replace(GENERATION, language_tags={"en": "en"}))
  features, _ = kind.features(spec, examples[:1], vocab, tagged, training=True)
  assert int(features[0]["decoder_start"]) == vocab.encode("en")[0]
  two_tokens = dataclasses.replace(RECIPE, generation=dataclasses.replace(GENERATION, language_tags={"en": "the"}))
  with pytest.raises(errors.ConfigError, match="the tag 'the' of 'en' is 2 tokens"):
    kind.features(spec, examples[:1], vocab, two_tokens, training=True)
  with pytest.raises(errors.ConfigError, match="target language 'de' has no tag .* \\(tags for: en\\)"):
    kind.features(spec, examples, vocab, tagged, training=True)


@pytest.mark.e2e
def test_qg_fine_tunes_decodes_and_writes_one_line_per_source(tmp_path):
  settings = xtreme.FinetuneSettings(tasks={"QG": RECIPE}, log_every=1)
  runner = xtreme.XtremeRunner(str(tmp_path / "run"), SAMPLE, TINY.replace(vocab_size=1024, max_positions=48),
                               paths.sample_vocab(), None, settings, PartitionConfig(), benchmark="xglue")
  plan = xtreme.check_run(runner, ("QG",), {"QG": ["en", "de"]}, None)
  xtreme.run_benchmark(runner, plan, None, False)
  for lg in ("en", "de"):
    lines = (tmp_path / "run" / "submission" / "QG" / f"{lg}.prediction").read_text().split("\n")
    refs = [ex["target"] for ex in xglue_readers.read("QG", SAMPLE, lg, "test")]
    assert lines[-1] == "" and len(lines) - 1 == len(refs)
    assert 0.0 <= bleu.xglue_bleu(lines[:-1], refs) <= 1.0
  entry = runner.store.run_entry("QG")  # the final model predicts; its training BLEU was measured once
  assert entry["selected_step"] == entry["train_steps"] == 4 and 0.0 <= entry["train_accuracy"] <= 100.0
  assert all(np.isfinite(loss) for _, loss in entry["history"])


def test_decoding_settings_are_checked_when_configured():
  with pytest.raises(errors.ConfigError, match="length_penalty='gnm'; expected one of"):
    task_kinds.GenerationSettings(length_penalty="gnm")
  with pytest.raises(errors.ConfigError, match="decoder_from='middle'"):
    task_kinds.GenerationSettings(decoder_from="middle")
  with pytest.raises(errors.ConfigError, match="beam_size=0"):
    task_kinds.GenerationSettings(beam_size=0)
