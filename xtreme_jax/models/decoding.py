"""Greedy and beam search over any incremental step function, jittable with a static maximum length.

A step function maps `(tokens (N,), cache, t)` to `(logits (N, vocab), cache)`:
the logits of the token after `tokens` at output position `t` (0 = the
first generated token, whose input is the start token). Both searches

* never generate `pad_id`, and force `eos_id` at the last position
  (`max_length - 1`), as fairseq does: every output ends with EOS and has at
  most `max_length` tokens, EOS included;
* leave a finished hypothesis alone: positions after its EOS hold `pad_id`.

Beam search follows fairseq's `SequenceGenerator`: alive hypotheses are
ranked by their summed log-probability; an EOS continuation is finished only
when it ranks among the top `beam_size` candidates of its batch element,
and an element stops when it holds `beam_size` finished hypotheses. A
finished hypothesis is scored by its summed log-probability divided by a
length penalty of its length n (EOS counted):

    fairseq: n ** alpha            gnmt: ((5 + n) / 6) ** alpha   (Wu et al. 2016)

With that rule a beam of 1 is greedy search, and a beam of at least
V ** (L - 1) (V the tokens that may be generated, L = max_length) keeps every
hypothesis alive, so it returns the exhaustive search's best outputs.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from xtreme_jax import errors

Array = jax.Array
StepFn = Callable[[Array, Any, Array], tuple[Array, Any]]
LENGTH_PENALTIES = ("fairseq", "gnmt")


class SearchResult(NamedTuple):
  sequences: Array  # (batch, n, max_length) int32, pad_id after EOS; n = n_best (beam) or 1 (greedy)
  scores: Array     # (batch, n) float32: beam: length-penalised log-probability (-inf: none); greedy: summed
  lengths: Array    # (batch, n) int32: tokens up to and including EOS


def length_penalty(length: Array, alpha: float, style: str = "fairseq") -> Array:
  """The divisor of a finished hypothesis' log-probability (see the module docstring)."""
  length = jnp.asarray(length, jnp.float32)
  if style == "fairseq":
    return length ** alpha
  if style == "gnmt":
    return ((5.0 + length) / 6.0) ** alpha
  raise errors.ConfigError(f"length penalty style {style!r}; expected one of {LENGTH_PENALTIES}")


def _log_probs(logits: Array, t: Array, max_length: int, eos_id: int, pad_id: int) -> Array:
  """Log-softmax (float32) with pad forbidden, and only EOS allowed at the last position."""
  logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  vocab = jnp.arange(logp.shape[-1])
  logp = jnp.where(vocab == pad_id, -jnp.inf, logp)
  return jnp.where((t == max_length - 1) & (vocab != eos_id), -jnp.inf, logp)


def _lengths(sequences: Array, eos_id: int) -> Array:
  is_eos = sequences == eos_id
  return jnp.where(jnp.any(is_eos, -1), jnp.argmax(is_eos, -1) + 1, 0).astype(jnp.int32)


def _check(max_length: int, eos_id: int, pad_id: int) -> None:
  if max_length < 1:
    raise errors.ConfigError(f"max_length={max_length}; expected >= 1")
  if eos_id == pad_id:
    raise errors.ConfigError(f"eos_id and pad_id are both {eos_id}; they must differ")


def greedy_search(step_fn: StepFn, cache: Any, start_ids: Array, *, max_length: int, eos_id: int,
                  pad_id: int = 0) -> SearchResult:
  """The most probable next token at every position, until EOS (or the forced EOS at `max_length`)."""
  _check(max_length, eos_id, pad_id)
  batch = start_ids.shape[0]
  init = (jnp.zeros((), jnp.int32), jnp.full((batch, max_length), pad_id, jnp.int32), start_ids.astype(jnp.int32),
          jnp.zeros((batch,), jnp.float32), jnp.zeros((batch,), bool), cache)

  def cond(state):
    t, *_, done, _ = state
    return (t < max_length) & ~jnp.all(done)

  def body(state):
    t, seqs, last, logp, done, cache = state
    logits, cache = step_fn(last, cache, t)
    step_logp = _log_probs(logits, t, max_length, eos_id, pad_id)
    token = jnp.argmax(step_logp, axis=-1).astype(jnp.int32)
    token = jnp.where(done, pad_id, token)
    logp = logp + jnp.where(done, 0.0, jnp.take_along_axis(step_logp, token[:, None], -1)[:, 0])
    seqs = jax.lax.dynamic_update_slice(seqs, token[:, None], (0, t))
    seqs = nn.with_logical_constraint(seqs, ("batch", None))
    return t + 1, seqs, token, logp, done | (token == eos_id), cache

  _, seqs, _, logp, _, _ = jax.lax.while_loop(cond, body, init)
  return SearchResult(seqs[:, None], logp[:, None], _lengths(seqs, eos_id)[:, None])


def gather_beams(cache: Any, indices: Array, keep: Callable[[tuple], bool] | None = None) -> Any:
  """Rows `indices` (batch * beam,) of every cache leaf with that leading dimension (those `keep(path)` allows)."""
  def one(path, leaf):
    if leaf.ndim == 0 or leaf.shape[0] != indices.shape[0] or (keep is not None and not keep(path)):
      return leaf
    return jnp.take(leaf, indices, axis=0)
  return jax.tree_util.tree_map_with_path(one, cache)


def beam_search(step_fn: StepFn, cache: Any, start_ids: Array, *, beam_size: int, max_length: int, eos_id: int,
                pad_id: int = 0, alpha: float = 1.0, style: str = "fairseq", n_best: int = 1,
                reorder: Callable[[Any, Array], Any] = gather_beams) -> SearchResult:
  """fairseq-style beam search; returns the `n_best` finished hypotheses per batch element, best first.

  `cache` is the step function's state for batch * beam_size rows (each
  example repeated `beam_size` times, beam-major within an example);
  `reorder(cache, rows)` picks the rows of the surviving beams (default:
  every leaf with that leading dimension; a cache of per-example constants,
  such as the encoder's cross-attention keys, need not be moved; a cache that
  keeps an index of each row's history moves only that index, as
  `Seq2SeqModel.generate` does with `layers.reorder_cache_rows`).
  """
  _check(max_length, eos_id, pad_id)
  length_penalty(1, alpha, style)
  if not 1 <= n_best <= beam_size:
    raise errors.ConfigError(f"n_best={n_best}; expected 1..beam_size ({beam_size})")
  batch, k = start_ids.shape[0], beam_size

  def cond(s):
    return (s["t"] < max_length) & ~jnp.all(s["done"])

  def body(s):
    t, seqs = s["t"], s["seqs"]
    last = jnp.where(t == 0, jnp.repeat(start_ids.astype(jnp.int32), k),
                     jax.lax.dynamic_index_in_dim(seqs, jnp.maximum(t - 1, 0), axis=2, keepdims=False).reshape(-1))
    logits, cache = step_fn(last, s["cache"], t)
    step_logp = _log_probs(logits, t, max_length, eos_id, pad_id)
    vocab = step_logp.shape[-1]
    cand = s["logp"][:, :, None] + step_logp.reshape(batch, k, vocab)  # (batch, beam, vocab)

    # The best `k` non-EOS continuations stay alive; EOS continuations may finish (`_finish`).
    eos = cand[:, :, eos_id]
    alive = jnp.where(jnp.arange(vocab) == eos_id, -jnp.inf, cand).reshape(batch, -1)
    logp, flat = jax.lax.top_k(alive, k)
    fin_seqs, fin_scores, fin_count = _finish(s, eos, logp, eos_id, alpha, style)

    beam, token = flat // vocab, (flat % vocab).astype(jnp.int32)
    seqs = jnp.take_along_axis(seqs, beam[:, :, None], axis=1)
    seqs = jnp.where(jnp.arange(max_length) == t, token[:, :, None], seqs)
    rows = (jnp.arange(batch)[:, None] * k + beam).reshape(-1)
    done = s["done"] | (fin_count >= k) | ~jnp.any(jnp.isfinite(logp), axis=1)
    constrain = lambda x: nn.with_logical_constraint(x, ("batch",) + (None,) * (x.ndim - 1))  # noqa: E731
    return dict(t=t + 1, seqs=constrain(seqs), logp=constrain(logp), fin_seqs=constrain(fin_seqs),
                fin_scores=constrain(fin_scores), fin_count=fin_count, done=done, cache=reorder(cache, rows))

  s = jax.lax.while_loop(cond, body, _initial_beams(cache, batch, k, max_length, pad_id))
  seqs = s["fin_seqs"][:, :n_best]
  return SearchResult(seqs, s["fin_scores"][:, :n_best], _lengths(seqs, eos_id))


def _initial_beams(cache: Any, batch: int, k: int, max_length: int, pad_id: int) -> dict:
  """The search state before step 0: one live beam per example, nothing finished."""
  neg = jnp.full((batch, k), -jnp.inf, jnp.float32)
  return dict(t=jnp.zeros((), jnp.int32), seqs=jnp.full((batch, k, max_length), pad_id, jnp.int32),
              logp=neg.at[:, 0].set(0.0), fin_seqs=jnp.full((batch, k, max_length), pad_id, jnp.int32),
              fin_scores=neg, fin_count=jnp.zeros((batch,), jnp.int32), done=jnp.zeros((batch,), bool),
              cache=cache)


def _finish(s: dict, eos: Array, logp: Array, eos_id: int, alpha: float, style: str) -> tuple[Array, Array, Array]:
  """The finished hypotheses after step `s["t"]`: the EOS continuations (`eos`, (batch, beam) log-probs) that
  rank among the top k of all candidates join them, best first, until k are finished; (fin_seqs, fin_scores,
  fin_count). The k-th best of all candidates is the k-th best of the EOS ones and of `logp` (the k best
  others): a top-k over the k x V candidates alone compiles to a full sort on CPU."""
  t, k = s["t"], eos.shape[1]
  rank = jnp.arange(k)
  kth = jax.lax.top_k(jnp.concatenate([logp, eos], axis=1), k)[0][:, -1:]
  eligible = (eos >= kth) & jnp.isfinite(eos) & ~s["done"][:, None]
  better = (eos[:, None, :] > eos[:, :, None]) | ((eos[:, None, :] == eos[:, :, None]) &
                                                  (rank[None, None, :] < rank[None, :, None]))
  order = jnp.sum(better & eligible[:, None, :], axis=-1)
  accept = eligible & (order < (k - s["fin_count"])[:, None])
  new_seqs = jnp.where(jnp.arange(s["seqs"].shape[-1]) == t, eos_id, s["seqs"])
  new_scores = jnp.where(accept, eos / length_penalty(t + 1, alpha, style), -jnp.inf)
  fin_scores, pick = jax.lax.top_k(jnp.concatenate([s["fin_scores"], new_scores], axis=1), k)
  fin_seqs = jnp.take_along_axis(jnp.concatenate([s["fin_seqs"], new_seqs], axis=1), pick[:, :, None], axis=1)
  return fin_seqs, fin_scores, s["fin_count"] + jnp.sum(accept, axis=1).astype(jnp.int32)
