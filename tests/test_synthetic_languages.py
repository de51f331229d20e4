"""Synthetic languages for transfer studies (xtreme_jax.data.synthetic): the base grammar and derived languages."""

import collections
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from xtreme_jax import errors
from xtreme_jax.data.synthetic import grammar, transforms
from xtreme_jax.data.synthetic.grammar import BaseLanguage, Leaf, Node
from xtreme_jax.data.synthetic.transforms import (Corpus, HeadFinal, InvertOrder, Language, PartialOverlap,
                                                  PermuteConstituents, ScriptChange, VocabularyShift)

TIER = "unit"  # conftest.py: this file's tier

BASE = BaseLanguage(seed=0)


@pytest.fixture(scope="module")
def sample():
  return BASE.sentences(300, seed=1)


def _word(pos, kind="", skip=0):
  return [w for w in BASE.lexicon if w.pos == pos and w.kind == kind][skip]


def _nodes(node):
  yield node
  for child in node.children:
    if isinstance(child, Node):
      yield from _nodes(child)


# -- the base language ----------------------------------------------------------------------------------------


def test_lexicon_has_the_tags_and_distinct_forms():
  assert len(BASE.lexicon) == 300 and [w.id for w in BASE.lexicon] == list(range(300))
  tags = {w.pos for w in BASE.lexicon}
  assert {"NOUN", "VERB", "ADJ", "DET", "ADP", "PRON", "ADV", "CCONJ", "SCONJ", "AUX", "PUNCT"} <= tags
  assert tags <= set(grammar.UPOS_TAGS)
  forms = [f for w in BASE.lexicon for f in w.forms]
  assert len(forms) == len(set(forms))
  assert all(f.isascii() and f.isalpha() and f.islower() for w in BASE.lexicon if w.pos != "PUNCT" for f in w.forms)
  assert all(len(w.forms) == 2 for w in BASE.lexicon if w.pos in ("NOUN", "VERB", "DET", "AUX"))


def test_same_seeds_give_the_same_sentences_and_other_sample_seeds_others(sample):
  again = BaseLanguage(seed=0).sentences(300, seed=1)
  assert again == sample
  assert BASE.sentences(50, seed=1) == sample[:50]  # a sample is a prefix of a longer one
  other = BASE.sentences(300, seed=2)
  assert sum(a.tokens == b.tokens for a, b in zip(sample, other)) < 10
  shared = {w.forms for w in BaseLanguage(seed=1).lexicon} & {w.forms for w in BASE.lexicon}
  assert len(shared) < 30  # another language seed: another lexicon (short forms may coincide)


def test_sentences_are_the_same_in_another_process():
  """Nothing depends on Python's per-process string hash (another PYTHONHASHSEED gives the same sentences)."""
  code = ("import json; from xtreme_jax.data.synthetic import grammar, transforms as t; "
          "b = grammar.BaseLanguage(seed=3); lang = t.Language(b, (t.PartialOverlap(0.5, seed=2), "
          "t.PermuteConstituents(seed=4)));"
          "print(json.dumps([s.tokens for s in lang.sentences(20, seed=5)]))")
  env = dict(os.environ, PYTHONHASHSEED="12345")
  out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
  lang = Language(BaseLanguage(seed=3), (PartialOverlap(0.5, seed=2), PermuteConstituents(seed=4)))
  assert json.loads(out) == [list(s.tokens) for s in lang.sentences(20, seed=5)]


def test_subjects_agree_with_their_verbs(sample):
  checked = 0
  for sentence in sample:
    for node in _nodes(sentence.derivation):
      if node.label == "S":
        subject = next(c for c in node.children if isinstance(c, Node) and c.label == "NP")
        verb = node.children[node.head].head_leaf()
        assert verb.upos in ("VERB", "AUX") and verb.number == subject.number == node.number
        if isinstance(node.children[0], Leaf) and node.children[0].upos == "AUX":  # a question's AUX
          assert node.children[0].number == subject.number
        checked += 1
      if node.label == "NP" and node.children[0].label == "DET":
        assert node.children[0].number == node.children[node.head].number == node.number
      if node.label == "NP" and node.children[node.head].label == "CCONJ":
        assert node.number == "Plur"
  assert checked > len(sample)  # embedded clauses too
  plural_subjects = sum(next(c for c in s.derivation.children if isinstance(c, Node)).number == "Plur" for s in sample)
  assert 0.3 < plural_subjects / len(sample) < 0.8


def test_tokens_and_tags_follow_the_derivation(sample):
  for sentence in sample:
    leaves = sentence.derivation.leaves()
    assert sentence.tags == tuple(leaf.upos for leaf in leaves)
    assert sentence.word_ids == tuple(leaf.word_id for leaf in leaves)
    assert all(tag == BASE.lexicon[w].pos for tag, w in zip(sentence.tags, sentence.word_ids))
    assert sentence.tokens == tuple(grammar.inflect(BASE.lexicon[leaf.word_id].forms, leaf.number) for leaf in leaves)
    assert sentence.tokens[-1] == ("?" if sentence.mood == "question" else ".")
    assert sentence.tags[-1] == "PUNCT" and "PUNCT" not in sentence.tags[:-1]
  verb_forms = {(BASE.lexicon[leaf.word_id].forms.index(s.tokens[i]), leaf.number)
                for s in sample for i, leaf in enumerate(s.derivation.leaves()) if leaf.upos == "VERB"}
  assert verb_forms == {(0, "Sing"), (1, "Plur")}  # plural verbs take the plural form


def test_labels_are_balanced_topics():
  sentences = BASE.sentences(600, seed=3)
  labels = collections.Counter(s.label for s in sentences)
  assert sorted(labels) == list(BASE.labels) == ["topic0", "topic1", "topic2", "topic3"]
  assert all(110 <= count <= 190 for count in labels.values()), labels  # 150 expected
  moods = collections.Counter(s.mood for s in sentences)
  assert sorted(moods) == sorted(grammar.MOODS) and all(160 <= c <= 240 for c in moods.values()), moods
  # the topic shows in the content words: a noun's home topic is the sentence's more often than not
  homes = {w.id: int(np.argmax(w.weights)) for w in BASE.lexicon if w.pos == "NOUN"}
  nouns = [(homes[w], s.topic) for s in sentences for w in s.word_ids if w in homes]
  assert sum(home == topic for home, topic in nouns) / len(nouns) > 0.6


def test_nouns_are_zipfian():
  counts = collections.Counter(w for s in BASE.sentences(1500, seed=4) for w, t in zip(s.word_ids, s.tags)
                               if t == "NOUN")
  per_noun = sorted((counts[w.id] for w in BASE.lexicon if w.pos == "NOUN"), reverse=True)
  assert per_noun[0] > 8 * max(1, per_noun[len(per_noun) // 2])


def test_bad_settings_are_user_errors():
  with pytest.raises(errors.ConfigError, match="at least"):
    BaseLanguage(vocabulary_size=40)
  with pytest.raises(errors.ConfigError, match="3 classes"):
    BaseLanguage(n_topics=2)
  with pytest.raises(errors.ConfigError, match="non-negative"):
    BaseLanguage(seed=-1)
  with pytest.raises(errors.ConfigError, match="give a count"):
    Language(BASE).sentences()
  with pytest.raises(errors.ConfigError, match="share"):
    PartialOverlap(1.5)
  with pytest.raises(errors.ConfigError, match="script"):
    ScriptChange("klingon")


# -- derived languages ----------------------------------------------------------------------------------------


REORDERINGS = [(InvertOrder(),), (HeadFinal(),), (PermuteConstituents(seed=3),),
               (VocabularyShift(seed=1), HeadFinal(), PermuteConstituents(seed=2), InvertOrder())]


@pytest.mark.parametrize("steps", REORDERINGS, ids=lambda steps: "+".join(t.name for t in steps))
def test_reorderings_keep_the_derivation_and_move_tags_with_tokens(sample, steps):
  language = Language(BASE, steps)
  moved = 0
  for base in sample[:100]:
    derived = language.derive(base)
    assert derived.derivation == base.derivation and derived.label == base.label
    assert sorted(derived.order) == list(range(len(base.tokens)))
    assert derived.tags == tuple(base.tags[i] for i in derived.order)
    assert derived.word_ids == tuple(base.word_ids[i] for i in derived.order)
    leaves = base.derivation.leaves()
    assert derived.tokens == tuple(grammar.inflect(language.forms[leaves[i].word_id], leaves[i].number)
                                   for i in derived.order)
    assert derived.tags[-1] == "PUNCT"
    moved += derived.order != tuple(range(len(base.tokens)))
  assert moved > 80


def test_vocabulary_shift_is_disjoint_and_a_fixed_mapping(sample):
  shifted = Language(BASE, (VocabularyShift(seed=1),))
  base_forms = {f for w in BASE.lexicon for f in w.forms}
  new_forms = [f for forms in shifted.forms for f in forms]
  assert base_forms.isdisjoint(new_forms) and len(new_forms) == len(set(new_forms)) == len(base_forms)
  mapping = {}
  for base in sample:
    derived = shifted.derive(base)
    assert set(derived.tokens).isdisjoint(base_forms)
    for old, new in zip(base.tokens, derived.tokens):
      assert mapping.setdefault(old, new) == new
  assert shifted.forms != Language(BASE, (VocabularyShift(seed=2),)).forms


@pytest.mark.parametrize("share,kept", [(0.5, 150), (0.0, 0), (1.0, 300), (0.1, 30)])
def test_partial_overlap_keeps_that_share_of_word_types(share, kept):
  language = Language(BASE, (PartialOverlap(share, seed=7),))
  same = [w.id for w in BASE.lexicon if language.forms[w.id] == w.forms]
  assert len(same) == kept
  base_forms = {f for w in BASE.lexicon for f in w.forms}
  changed = {f for i, forms in enumerate(language.forms) if i not in same for f in forms}
  assert changed.isdisjoint(base_forms)
  assert set(same) == set(PartialOverlap(share, seed=7).kept(300))
  if 0 < share < 1:
    assert set(same) != set(PartialOverlap(share, seed=8).kept(300))


def _transitive_sentence():
  """The + man sees the + dogs at the + house ."""
  det, man, dog, house = _word("DET"), _word("NOUN"), _word("NOUN", skip=1), _word("NOUN", skip=2)
  sees, at, stop = _word("VERB", "transitive"), _word("ADP"), _word("PUNCT", "statement")
  subject = Node("NP", 1, (Leaf(det.id, "DET", "Sing"), Leaf(man.id, "NOUN", "Sing")), "Sing")
  obj = Node("NP", 1, (Leaf(det.id, "DET", "Plur"), Leaf(dog.id, "NOUN", "Plur")), "Plur")
  pp = Node("PP", 0, (Leaf(at.id, "ADP"), Node("NP", 1, (Leaf(det.id, "DET", "Sing"), Leaf(house.id, "NOUN", "Sing")),
                                                "Sing")))
  vp = Node("VP", 0, (Leaf(sees.id, "VERB", "Sing"), obj, pp), "Sing")
  sentence = BASE.realize(Node("S", 1, (subject, vp, Leaf(stop.id, "PUNCT")), "Sing"))
  words = [det.forms[0], man.forms[0], sees.forms[0], det.forms[1], dog.forms[1], at.forms[0], det.forms[0],
           house.forms[0], "."]
  assert sentence.tokens == tuple(words)
  return sentence, words


def test_head_final_puts_the_verb_after_its_object_and_postpositions():
  sentence, w = _transitive_sentence()
  derived = Language(BASE, (HeadFinal(),)).derive(sentence)
  # the man | the dogs | the house at | sees | .
  assert derived.tokens == (w[0], w[1], w[3], w[4], w[6], w[7], w[5], w[2], ".")
  assert derived.tags == ("DET", "NOUN", "DET", "NOUN", "DET", "NOUN", "ADP", "VERB", "PUNCT")
  assert derived.order == (0, 1, 3, 4, 6, 7, 5, 2, 8)


def test_head_final_heads_are_last_everywhere(sample):
  language = Language(BASE, (HeadFinal(),))
  for base in sample[:100]:
    for node, order in transforms.surface_orders(language.derive(base)):
      words = [k for k in order if node.children[k].label != "PUNCT"]
      assert words[-1] == node.head


def test_invert_order_reverses_and_keeps_the_final_punctuation():
  sentence, w = _transitive_sentence()
  derived = Language(BASE, (InvertOrder(),)).derive(sentence)
  assert derived.tokens == tuple(w[7::-1]) + (".",)
  assert derived.tags == ("NOUN", "DET", "ADP", "NOUN", "DET", "VERB", "NOUN", "DET", "PUNCT")


def test_permute_constituents_permutes_each_rule_alike(sample):
  permute = PermuteConstituents(seed=3)
  language = Language(BASE, (permute,))
  seen = collections.defaultdict(set)
  for base in sample:
    for node, order in transforms.surface_orders(language.derive(base)):
      labels = tuple(c.label for c in node.children)
      seen[node.label, labels].add(tuple(labels[k] for k in order))
  assert all(len(orders) == 1 for orders in seen.values()), seen
  moved = [rule for rule, orders in seen.items() if next(iter(orders)) != rule[1]]
  assert len(seen) > 20 and len(moved) > 5
  vp = ("VERB", "NP", "PP")
  assert seen["VP", vp] == {tuple(vp[i] for i in permute.permutation("VP", vp))}
  # punctuation stays last and is no part of the rule: the main clause goes as an embedded one
  assert seen["S", ("NP", "VP", "PUNCT")] == {next(iter(seen["S", ("NP", "VP")])) + ("PUNCT",)}


def test_script_change_maps_letters_through_the_table():
  assert ScriptChange().convert("kat") == "\u043a\u0430\u0443"  # к а у
  assert ScriptChange("greek").convert("kat") == "λαυ"
  assert ScriptChange().convert("Zu.") == "\u0429\u0444\u0964"  # Щ ф ।
  language = Language(BASE, (ScriptChange(),))
  assert language.forms[_word("NOUN").id] == tuple(ScriptChange().convert(f) for f in _word("NOUN").forms)
  characters = {c for forms in language.forms for f in forms for c in f}
  assert characters.isdisjoint("abcdefghijklmnopqrstuvwxyz.?")


def test_compositions_of_forms_and_orders_commute(sample):
  one = Language(BASE, (VocabularyShift(seed=1), InvertOrder(), ScriptChange()))
  other = Language(BASE, (InvertOrder(), VocabularyShift(seed=1), ScriptChange()))
  assert [one.derive(s) for s in sample[:30]] == [other.derive(s) for s in sample[:30]]
  assert one.name == "shift1+invert+script-cyrillic" and Language(BASE).name == "base"
  # an inversion undoes itself; a head-final order is head-final whatever came before
  twice = Language(BASE, (InvertOrder(), InvertOrder()))
  assert [twice.derive(s).tokens for s in sample[:30]] == [s.tokens for s in sample[:30]]
  after = Language(BASE, (PermuteConstituents(seed=3), HeadFinal()))
  assert all(order[-1] == node.head for s in sample[:30]
             for node, order in transforms.surface_orders(after.derive(s)) if node.children[order[-1]].label != "PUNCT")


# -- natural corpora ------------------------------------------------------------------------------------------


CORPUS = ["the cat sat .", "the dog saw the cat !", "dogs bark"]


def test_corpus_sentences_have_a_frequency_ordered_vocabulary():
  sentences = transforms.corpus_sentences(CORPUS)
  # the (3), cat (2), then one each by form: ! . bark dog dogs sat saw
  assert [w.forms[0] for w in Corpus.from_lines(CORPUS).lexicon] == \
      ["the", "cat", "!", ".", "bark", "dog", "dogs", "sat", "saw"]
  assert sentences[0].word_ids == (0, 1, 7, 3) and sentences[0].tags is None and sentences[0].derivation is None
  assert sentences[2].tokens == ("dogs", "bark")


def test_corpus_under_a_shift_and_an_inversion():
  corpus = Corpus.from_lines(CORPUS)
  inverted = [s.tokens for s in Language(corpus, (InvertOrder(),)).sentences()]
  assert inverted == [("sat", "cat", "the", "."), ("cat", "the", "saw", "dog", "the", "!"), ("bark", "dogs")]
  shifted = Language(corpus, (VocabularyShift(seed=1),))
  the, cat, bang, stop, bark, dog, dogs, sat, saw = (forms[0] for forms in shifted.forms)
  assert [s.tokens for s in shifted.sentences()] == [(the, cat, sat, stop), (the, dog, saw, the, cat, bang),
                                                    (dogs, bark)]
  assert len({the, cat, bang, stop, bark, dog, dogs, sat, saw}) == 9
  assert {the, cat, bang, stop, bark, dog, dogs, sat, saw}.isdisjoint(" ".join(CORPUS).split())
  both = Language(corpus, (VocabularyShift(seed=1), InvertOrder(), ScriptChange()))
  assert both.sentences()[0].tokens == tuple(ScriptChange().convert(t) for t in (sat, cat, the, stop))
  overlap = Language(corpus, (PartialOverlap(1 / 3, seed=0),))
  assert sum(forms == w.forms for forms, w in zip(overlap.forms, corpus.lexicon)) == 3


def test_reorderings_by_derivation_refuse_a_corpus():
  corpus = Corpus.from_lines(CORPUS)
  for transformation in (HeadFinal(), PermuteConstituents(seed=1)):
    with pytest.raises(errors.ConfigError, match=f"{type(transformation).__name__} reorders phrases by their "
                                                 "derivation, which a natural corpus does not have"):
      Language(corpus, (VocabularyShift(), transformation))
    with pytest.raises(errors.ConfigError, match="derivation"):
      transformation.reorder(corpus.sentences()[0])
  with pytest.raises(errors.ConfigError, match="split it by lines"):
    Language(corpus).sentences(2, seed=1)
