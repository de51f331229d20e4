"""Blocked k-NN, BUCC margin mining and Tatoeba retrieval (xtreme_jax.evaluation.retrieval)."""

import numpy as np
import pytest

from xtreme_jax.evaluation import retrieval as R

TIER = "integration"  # conftest.py: this file's tier


def _unit(rng, n, d):
  return R.l2_normalize(rng.standard_normal((n, d)).astype(np.float32))


def _brute_topk(q, keys, k):
  s = q.astype(np.float64) @ keys.astype(np.float64).T
  idx = np.argsort(-s, axis=1, kind="stable")[:, :k]
  return np.take_along_axis(s, idx, axis=1), idx


def _reference_mine(x, y, k):
  """Transcription of the reference `mine_bitext(mode='mine', retrieval='max')`
  (XTREME utils_retrieve.py / LASER mine_bitexts.py) with brute-force k-NN."""
  x2y_sim, x2y_ind = _brute_topk(x, y, min(len(y), k))
  y2x_sim, y2x_ind = _brute_topk(y, x, min(len(x), k))
  x2y_mean, y2x_mean = x2y_sim.mean(axis=1), y2x_sim.mean(axis=1)

  def score_candidates(a, b, inds, fwd_mean, bwd_mean):
    scores = np.zeros(inds.shape)
    for i in range(scores.shape[0]):
      for j in range(scores.shape[1]):
        c = inds[i, j]
        scores[i, j] = a[i].astype(np.float64).dot(b[c]) / ((fwd_mean[i] + bwd_mean[c]) / 2)
    return scores

  fwd_scores = score_candidates(x, y, x2y_ind, x2y_mean, y2x_mean)
  bwd_scores = score_candidates(y, x, y2x_ind, y2x_mean, x2y_mean)
  fwd_best = x2y_ind[np.arange(x.shape[0]), fwd_scores.argmax(axis=1)]
  bwd_best = y2x_ind[np.arange(y.shape[0]), bwd_scores.argmax(axis=1)]
  indices = np.stack((np.concatenate((np.arange(x.shape[0]), bwd_best)),
                      np.concatenate((fwd_best, np.arange(y.shape[0])))), axis=1)
  scores = np.concatenate((fwd_scores.max(axis=1), bwd_scores.max(axis=1)))
  seen_src, seen_trg, out = set(), set(), []
  for i in np.argsort(-scores, kind="stable"):
    s, t = indices[i]
    if s not in seen_src and t not in seen_trg:
      seen_src.add(s)
      seen_trg.add(t)
      if scores[i] > 0:
        out.append((int(s), int(t), scores[i]))
  return out


def test_l2_normalize_keeps_zero_rows():
  x = np.array([[3.0, 4.0], [0.0, 0.0], [-1.0, 0.0]], np.float32)
  np.testing.assert_allclose(R.l2_normalize(x), [[0.6, 0.8], [0.0, 0.0], [-1.0, 0.0]], rtol=1e-6)


@pytest.mark.parametrize("block_size,key_block_size", [(None, None), (7, None), (10, 11), (37, 64)])
def test_blocked_topk_matches_brute_force(block_size, key_block_size):
  rng = np.random.default_rng(0)
  q, keys = rng.standard_normal((37, 16)), rng.standard_normal((53, 16))  # 37, 53: primes
  scores, idx = R.blocked_topk(q, keys, 4, block_size, key_block_size=key_block_size)
  ref_s, ref_i = _brute_topk(q.astype(np.float32), keys.astype(np.float32), 4)
  assert scores.shape == idx.shape == (37, 4) and idx.dtype == np.int64 and scores.dtype == np.float32
  np.testing.assert_array_equal(idx, ref_i)
  np.testing.assert_allclose(scores, ref_s, rtol=1e-5, atol=1e-5)


def test_two_stage_topk_matches_lax_top_k():
  import jax

  rng = np.random.default_rng(8)
  s = rng.standard_normal((24, 256)).astype(np.float32)
  s[3, 100:140] = -np.inf  # masked entries
  s[5, [7, 200]] = 9.0  # a tie across chunks: lower index first, as lax.top_k
  s[6, :] = -5.0
  s[6, [20, 60, 120, 180]] = 1.0  # chunk maxima 1, 1, 1, 1, (2 below)
  s[6, [199, 240]] = 2.0
  s[6, 2] = 1.0  # ties the 1.0s, lowest index, in a chunk whose max is 1 too
  v, i = jax.jit(lambda a: R._topk_last(a, 4))(s)
  rv, ri = jax.lax.top_k(s, 4)
  np.testing.assert_array_equal(i, ri)
  np.testing.assert_array_equal(v, rv)
  v, i = jax.jit(lambda a: R._topk_first(a, 4))(s.T)
  assert v.shape == (24, 4)
  np.testing.assert_array_equal(i, ri)
  np.testing.assert_array_equal(v, rv)


def test_blocked_topk_two_stage_path_with_padding():
  rng = np.random.default_rng(9)
  q, keys = rng.standard_normal((70, 8)), rng.standard_normal((150, 8))  # keys padded to 160
  ref_s, ref_i = _brute_topk(q.astype(np.float32), keys.astype(np.float32), 4)
  for kbs in (None, 130):  # one key block / blocks of 144 (rounded up to whole chunks)
    scores, idx = R.blocked_topk(q, keys, 4, 32, key_block_size=kbs)
    np.testing.assert_array_equal(idx, ref_i)
    np.testing.assert_allclose(scores, ref_s, rtol=1e-5, atol=1e-5)


def test_blocked_topk_cosine_and_k_clamped():
  rng = np.random.default_rng(1)
  q, keys = rng.standard_normal((9, 8)) * 5, rng.standard_normal((3, 8)) * 0.1
  scores, idx = R.blocked_topk(q, keys, 4, 4, normalize=True)  # k clamped to 3 keys
  ref_s, ref_i = _brute_topk(R.l2_normalize(q), R.l2_normalize(keys), 3)
  np.testing.assert_array_equal(idx, ref_i)
  np.testing.assert_allclose(scores, ref_s, rtol=1e-5, atol=1e-6)
  assert np.all(np.abs(scores) <= 1 + 1e-6)


@pytest.mark.parametrize("nx,ny,block_size", [(29, 41, None), (29, 41, 6), (300, 150, 128)])
def test_blocked_topk_both_matches_two_searches(nx, ny, block_size):
  # (300, 150, 128): two-stage top-k both ways, y padded to 160, last x block padded.
  rng = np.random.default_rng(2)
  x, y = _unit(rng, nx, 12), _unit(rng, ny, 12)
  fs, fi, bs, bi = R.blocked_topk_both(x, y, 4, block_size)
  for (s, i), (q, keys) in zip([(fs, fi), (bs, bi)], [(x, y), (y, x)]):
    ref_s, ref_i = _brute_topk(q, keys, 4)
    np.testing.assert_array_equal(i, ref_i)
    np.testing.assert_allclose(s, ref_s, rtol=1e-5, atol=1e-6)
  # k larger than one side: clamped per direction, like min(len(other), k).
  fs, fi, bs, bi = R.blocked_topk_both(x[:3], y, 4, 2)
  assert fi.shape == (3, 4) and bi.shape == (ny, 3)
  np.testing.assert_array_equal(bi, _brute_topk(y, x[:3], 3)[1])


def test_margin_scores_by_hand():
  # 2 queries, k=2 candidates each, 3 keys.
  sims = np.array([[0.9, 0.5], [0.8, 0.2]])
  inds = np.array([[2, 0], [1, 2]])
  q_mean = sims.mean(axis=1)  # [0.7, 0.5]
  k_mean = np.array([0.4, 0.6, 0.3])
  expected = np.array([[0.9 / ((0.7 + 0.3) / 2), 0.5 / ((0.7 + 0.4) / 2)],
                       [0.8 / ((0.5 + 0.6) / 2), 0.2 / ((0.5 + 0.3) / 2)]])
  np.testing.assert_allclose(R.margin_scores(sims, inds, q_mean, k_mean), expected)
  np.testing.assert_allclose(R.margin_scores(sims, inds, q_mean, k_mean, "distance"),
                             sims - (q_mean[:, None] + k_mean[inds]) / 2)
  np.testing.assert_allclose(R.margin_scores(sims, inds, q_mean, k_mean, "absolute"), sims)


@pytest.mark.parametrize("nx,n_par,n_dis,block_size", [(30, 20, 15, 7), (290, 100, 90, 128)])
def test_mine_candidates_matches_reference_transcription(nx, n_par, n_dis, block_size):
  # The second case runs the two-stage top-k with padding on both sides.
  rng = np.random.default_rng(3)
  x = _unit(rng, nx, 8)
  y = R.l2_normalize(np.concatenate([x[rng.permutation(n_par)] + 0.3 * rng.standard_normal((n_par, 8)),
                                     rng.standard_normal((n_dis, 8))]).astype(np.float32))
  src, tgt, scores, knn = R.mine_candidates(x, y, 4, block_size=block_size, return_knn=True)
  ref = _reference_mine(x, y, 4)
  assert [(s, t) for s, t, _ in ref] == list(zip(src.tolist(), tgt.tolist()))
  np.testing.assert_allclose(scores, [sc for _, _, sc in ref], rtol=1e-5)
  assert np.all(np.diff(scores) <= 0) and np.all(scores > 0)
  # margin definition: cos / ((mean top-k of x + mean top-k of y) / 2), both means over k=4.
  i, j = int(src[0]), int(tgt[0])
  cos = float(x[i].astype(np.float64) @ y[j])
  mx = np.sort(x[i].astype(np.float64) @ y.T.astype(np.float64))[-4:].mean()
  my = np.sort(y[j].astype(np.float64) @ x.T.astype(np.float64))[-4:].mean()
  assert scores[0] == pytest.approx(cos / ((mx + my) / 2), rel=1e-5)
  np.testing.assert_allclose(knn["x2y_mean"][i], mx, rtol=1e-5)


def _bucc_problem(seed=4, n_pairs=40, n_src_only=12, n_distract=25, dim=64, noise=0.35):
  rng = np.random.default_rng(seed)
  n_src = n_pairs + n_src_only
  src = rng.standard_normal((n_src, dim)).astype(np.float32)
  perm = rng.permutation(n_pairs)  # target row p holds the translation of source perm[p]
  tgt = np.concatenate([src[perm] + noise * rng.standard_normal((n_pairs, dim)),
                        rng.standard_normal((n_distract, dim))]).astype(np.float32)
  order = rng.permutation(len(tgt))  # shuffle distractors in between
  tgt = tgt[order]
  src_ids = [f"en-{i:06d}" for i in range(n_src)]
  tgt_ids = [f"de-{i:06d}" for i in range(len(tgt))]
  inv = np.argsort(order)  # original target row -> shuffled row
  gold = {(src_ids[perm[p]], tgt_ids[inv[p]]) for p in range(n_pairs)}
  return src, tgt, src_ids, tgt_ids, gold


def test_mine_bucc_recovers_gold_and_rejects_distractors():
  src, tgt, src_ids, tgt_ids, gold = _bucc_problem()
  cands = R.mine_bucc(src, tgt, src_ids, tgt_ids, [f"s{i}" for i in range(len(src))],
                      [f"t{i}" for i in range(len(tgt))], k=4, block_size=16)
  scores = {(s, t): sc for s, t, sc in cands}
  assert gold <= set(scores)  # every gold pair is a candidate
  wrong = [sc for pair, sc in scores.items() if pair not in gold]
  assert wrong and min(scores[p] for p in gold) > max(wrong)  # a threshold separates them
  assert [sc for _, _, sc in cands] == sorted((sc for _, _, sc in cands), reverse=True)
  th = (max(wrong) + min(scores[p] for p in gold)) / 2
  assert {p for p, sc in scores.items() if sc >= th} == gold  # precision = recall = 1
  # one-to-one: no sentence used twice
  assert len({s for s, _, _ in cands}) == len(cands) == len({t for _, t, _ in cands})


def test_mine_bucc_duplicate_sentences_map_back_to_all_ids():
  src, tgt, src_ids, tgt_ids, gold = _bucc_problem(seed=5)
  g = sorted(gold)
  (s_a, t_a), (s_b, t_b) = g[0], g[1]
  ia = src_ids.index(s_a)
  # Source sentence a occurs twice more (rows appended at the end, same text,
  # same embedding); target sentence of pair b occurs twice.
  src2 = np.concatenate([src, src[[ia, ia]]])
  src_ids2 = src_ids + ["en-dup-1", "en-dup-2"]
  src_sents = [f"s{i}" for i in range(len(src))] + [f"s{ia}", f"s{ia}"]
  jb = tgt_ids.index(t_b)
  tgt2 = np.concatenate([tgt, tgt[[jb]]])
  tgt_ids2 = tgt_ids + ["de-dup"]
  tgt_sents = [f"t{i}" for i in range(len(tgt))] + [f"t{jb}"]

  cands = R.mine_bucc(src2, tgt2, src_ids2, tgt_ids2, src_sents, tgt_sents)
  scores = {(s, t): sc for s, t, sc in cands}
  for sid in (s_a, "en-dup-1", "en-dup-2"):
    assert scores[(sid, t_a)] == scores[(s_a, t_a)]
  assert scores[(s_b, "de-dup")] == scores[(s_b, t_b)]
  # Dedup first: the unified problem gives exactly the un-duplicated candidates.
  base = {(s, t): sc for s, t, sc in R.mine_bucc(src, tgt, src_ids, tgt_ids)}
  assert {p: sc for p, sc in scores.items() if "dup" not in p[0] + p[1]} == pytest.approx(base)
  # Without dedup the copies of a would compete for t_a (one-to-one), the
  # ratio margin of its neighbourhood would change, and ids would be lost.
  # duplicates='drop' is the reference evaluation: repeated sentences get no id.
  dropped = {(s, t) for s, t, _ in R.mine_bucc(src2, tgt2, src_ids2, tgt_ids2, src_sents, tgt_sents,
                                               duplicates="drop")}
  assert not any(p[0] in (s_a, "en-dup-1", "en-dup-2") or p[1] in (t_b, "de-dup") for p in dropped)
  assert dropped == {p for p in base if p[0] != s_a and p[1] != t_b}


def test_mine_bucc_keeps_last_occurrence_embedding():
  rng = np.random.default_rng(6)
  x, y = rng.standard_normal((5, 16)), rng.standard_normal((6, 16))
  last = rng.standard_normal((1, 16))
  x_dup = np.concatenate([x, last])  # row 5 has the same text as row 2 but another embedding
  got = R.mine_bucc(x_dup, y, list("012345"), list("uvwxyz"), list("abcdec"), None, threshold=None)
  # Same as mining the unique sentences with the embedding of the *last* "c".
  want = R.mine_bucc(np.concatenate([x[:2], last, x[3:]]), y, list("01234"), list("uvwxyz"),
                     threshold=None)
  got = {(s, t): sc for s, t, sc in got}
  expected = {}
  for s, t, sc in want:
    expected[(s, t)] = sc
    if s == "2":
      expected[("5", t)] = sc
  assert got == pytest.approx(expected)
  assert any(s == "5" for s, _ in got)


def test_tatoeba_predict_on_permutation():
  rng = np.random.default_rng(7)
  src = rng.standard_normal((50, 32)).astype(np.float32)
  perm = rng.permutation(50)
  tgt = 3.0 * src[perm] + 0.2 * rng.standard_normal((50, 32)).astype(np.float32)  # scale: cosine
  pred = R.tatoeba_predict(src, tgt, block_size=16)
  np.testing.assert_array_equal(pred, perm)  # target i -> its source sentence perm[i]
  np.testing.assert_array_equal(R.tatoeba_predict(tgt, src, block_size=7), np.argsort(perm))
  assert pred.dtype == np.int64 and pred.shape == (50,)


def test_pool_states_first_token_or_mean_over_real_tokens():
  states = np.array([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]],
                     [[0.0, 1.0], [2.0, 2.0], [4.0, 6.0]]], np.float32)
  mask = np.array([[1, 1, 0], [1, 1, 1]])
  np.testing.assert_array_equal(R.pool_states(states, mask, "cls"), [[1.0, 2.0], [0.0, 1.0]])
  np.testing.assert_allclose(R.pool_states(states, mask, "mean"), [[2.0, 3.0], [2.0, 3.0]])
  import jax.numpy as jnp
  np.testing.assert_allclose(R.pool_states(jnp.asarray(states), jnp.asarray(mask), "mean"), [[2.0, 3.0], [2.0, 3.0]])
  with pytest.raises(ValueError, match="pool='max'; expected one of"):
    R.pool_states(states, mask, "max")
