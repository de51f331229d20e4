"""Cached decoding that scales with the prefix: bucketed self-attention and index-reordered beams give the results of
the full-buffer path (every step attending over the whole max_length buffer, beam search moving whole cache rows)."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import TINY
from xtreme_jax.models import decoding
from xtreme_jax.models.seq2seq import DecodeSettings, Seq2SeqModel
from xtreme_jax.networks import layers
from xtreme_jax.networks.seq2seq import Seq2SeqConfig

TIER = "integration"  # conftest.py: this file's tier

EOS, BOS, LENGTH, BEAM = 2, 1, 24, 3
SOURCE = np.array([[5, 3, 4, 4, 3, 6], [4, 5, 3, 7, 0, 0], [6, 6, 7, 0, 0, 0]], np.int32)
BATCH = {"input_ids": SOURCE, "input_mask": (SOURCE > 0).astype(np.int32), "decoder_start": np.full(3, BOS, np.int32)}
MODEL = Seq2SeqModel(TINY.replace(vocab_size=8), Seq2SeqConfig(decoder_layers=2), eos_id=EOS)


def _full_buffer_generate(params, batch, settings):
  """`Seq2SeqModel.generate` as before buckets and row indices (trace it with `layers.DECODE_BUCKETS = 1`)."""
  step, cache = MODEL.decoder(params, batch, settings.beam_size, settings.max_length)
  common = dict(max_length=settings.max_length, eos_id=EOS, pad_id=MODEL.config.pad_token_id)
  if settings.beam_size == 1:
    return decoding.greedy_search(step, cache, batch["decoder_start"], **common)
  cache = layers.map_self_caches(lambda c: {name: x for name, x in c.items() if name != "cached_rows"}, cache)
  return decoding.beam_search(step, cache, batch["decoder_start"], beam_size=settings.beam_size, n_best=settings.n_best,
                              reorder=decoding.gather_beams, **common)


@pytest.fixture(scope="module")
def decoded():
  """{(path, beams): SearchResult} for greedy and beam 3 (3 sources, 24 tokens: 3 buckets of 8 positions)."""
  init_batch = {**BATCH, "targets": np.zeros((3, 4), np.int32), "target_mask": np.ones((3, 4), np.int32)}
  params = nn.unbox(jax.jit(MODEL.init)(jax.random.PRNGKey(4), init_batch))
  params = jax.tree_util.tree_map(lambda x: x * 3 if x.ndim >= 2 else x, params)  # peaked, far from ties
  assert layers.cache_buckets(LENGTH) == (8, 16, 24)
  out = {}
  for beams in (1, BEAM):
    settings = DecodeSettings(beam_size=beams, max_length=LENGTH, n_best=beams)
    out["buckets", beams] = jax.jit(lambda p, b, s=settings: MODEL.generate(p, b, s))(params, BATCH)
    with pytest.MonkeyPatch.context() as patch:
      patch.setattr(layers, "DECODE_BUCKETS", 1)
      out["full", beams] = jax.jit(lambda p, b, s=settings: _full_buffer_generate(p, b, s))(params, BATCH)
  return out


@pytest.mark.parametrize("beams", [1, BEAM])
def test_bucketed_decoding_equals_the_full_buffer_path(decoded, beams):
  new, old = decoded["buckets", beams], decoded["full", beams]
  np.testing.assert_array_equal(np.asarray(new.sequences), np.asarray(old.sequences))
  np.testing.assert_array_equal(np.asarray(new.lengths), np.asarray(old.lengths))
  # Equal bit for bit on the CPUs measured (`layers.BUCKET_STEP`), but the dots' rounding is XLA's to choose.
  np.testing.assert_allclose(np.asarray(new.scores), np.asarray(old.scores), rtol=1e-6)
  lengths = np.asarray(new.lengths)
  if beams > 1:  # hypotheses finished in the first bucket beside ones decoded into the last, differing by example
    assert lengths.min() < 8 and lengths.max() > 16
    assert not all(np.array_equal(lengths[0], row) for row in lengths[1:])
  else:
    assert np.all(lengths == LENGTH)


def test_a_cached_step_reads_only_the_bucket_that_holds_its_prefix():
  """Positions past the step's bucket are never read: NaN there leaves the step finite (the full buffer reads it)."""
  params = nn.unbox(jax.jit(MODEL.init)(jax.random.PRNGKey(0), MODEL.dummy_batch(3, SOURCE.shape[1], 4)))

  def fourth_step(params, batch):
    step, cache = MODEL.decoder(params, batch, 1, LENGTH)
    cache = jax.lax.fori_loop(0, 3, lambda t, cache: step(jnp.full((3,), 5, jnp.int32), cache, t)[1], cache)
    cache = layers.map_self_caches(lambda c: {**c, "cached_key": c["cached_key"].at[:, 8:].set(jnp.nan),
                                               "cached_value": c["cached_value"].at[:, 8:].set(jnp.nan)}, cache)
    return step(jnp.full((3,), 5, jnp.int32), cache, 3)[0]  # position 3: the first bucket, positions 0..7

  traced = lambda: jax.jit(lambda p, b: fourth_step(p, b))(params, BATCH)  # noqa: E731  (a new trace per call)
  assert np.all(np.isfinite(np.asarray(traced())))
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(layers, "DECODE_BUCKETS", 1)
    assert np.all(np.isnan(np.asarray(traced())))


def test_beam_reordering_moves_the_row_index_not_the_keys_and_values():
  keys = jnp.arange(4 * 3 * 1 * 2, dtype=jnp.float32).reshape(4, 3, 1, 2)
  cache = {"self_attention": {"cached_key": keys, "cached_value": keys, "cache_index": jnp.array(1)},
           "cross_attention": {"cached_key": keys, "cached_value": keys}}
  indexed = layers.index_cache_rows(cache)
  np.testing.assert_array_equal(indexed["self_attention"]["cached_rows"], np.repeat(np.arange(4)[:, None], 3, 1))
  assert "cached_rows" not in indexed["cross_attention"]
  moved = layers.reorder_cache_rows(indexed, jnp.array([1, 1, 3, 0]))
  np.testing.assert_array_equal(moved["self_attention"]["cached_rows"][:, 0], [1, 1, 3, 0])
  for part in ("self_attention", "cross_attention"):
    assert all(moved[part][name] is keys for name in ("cached_key", "cached_value"))


def test_cache_buckets_cover_the_buffer_in_at_most_decode_buckets_multiples_of_8():
  assert layers.cache_buckets(128) == tuple(range(16, 129, 16))
  assert layers.cache_buckets(100) == (16, 32, 48, 64, 80, 96, 100)  # multiples of 8 positions
  assert layers.cache_buckets(130) == (24, 48, 72, 96, 120, 130)
  assert layers.cache_buckets(20) == (8, 16, 20)
  assert layers.cache_buckets(5) == (5,)
  assert layers.cache_buckets(64, 1) == (64,)
