"""MLDoc (Schwenk & Li 2018) document classification, as the mBERT paper feeds it: the first two sentences.

Files are those the official `mldoc` scripts write from the Reuters corpora:
`{language}.train.{1000,2000,5000,10000}`, `{language}.dev`,
`{language}.test` (`language` the English name: english, german, french,
spanish, italian, japanese, russian, chinese), one document per line,
`LABEL<TAB>document`, labels `LABELS`. The official `generate_documents.py`
run under Python 3 (its shebang) writes the document as the repr of its
UTF-8 bytes, `MCAT<TAB>b'Die Deutsche B\\xc3\\xb6rse ...'` (quoted `b"..."`
when the text holds `'` and no `"`; `\\n`, `\\t`, `\\\\` and non-ASCII bytes
escaped); under Python 2 it writes the text itself. Both read: a document
that starts with `b'` or `b"` is such a literal, decoded exactly
(`ast.literal_eval`, then UTF-8), anything else is the text.

`read(path)` gives `{"id", "text_a", "text_b", "label"}`: the document's
first sentence and its second (empty when it has one), the pair the encoder
reads (Wu & Dredze 2019). Sentences are NLTK's Punkt splitter's, as the
paper's (its footnote 2) and the authors' code (shijie-wu/crosslingual-nlp,
`sent_tokenize`): the pretrained model of the document's language (bundled,
`resources/punkt_tab`: en de fr es it ru), and for a language without one
(ja, zh) the English model, the authors' fallback, so Japanese and Chinese
text, whose `。` Punkt does not split at, is mostly one sentence (the
encoder's 128 subwords cut it). The language comes from the file name
(`german.test`), English when the name is not an MLDoc language's.

Blank lines are skipped; a row that is not `LABEL<TAB>document`, has another
label or a malformed or non-UTF-8 bytes literal is a `DataError` naming the
file and line.
"""

from __future__ import annotations

import ast
import collections
import functools
import os
from typing import Optional

from xtreme_jax import errors
from xtreme_jax.data import paths
from xtreme_jax.data.readers.xtreme_readers import malformed, numbered_lines
from xtreme_jax.registry.mbert import MLDOC_LABELS as LABELS, MLDOC_LANGUAGES

PUNKT_DIR = paths.resources_dir("punkt_tab")
PUNKT_MODELS = ("english", "german", "french", "spanish", "italian", "russian")  # NLTK has none for ja / zh


def punkt_model(language: str) -> str:
  """The Punkt model that splits `language` (an MLDoc code `de` or name `german`): its own, else `english`."""
  name = MLDOC_LANGUAGES.get(language, language)
  if name not in PUNKT_MODELS and name not in MLDOC_LANGUAGES.values():
    raise errors.ConfigError(f"no sentence splitter for language {language!r}; expected one of MLDoc's: "
                             f"{' '.join(sorted(MLDOC_LANGUAGES))} (or their English names)")
  return name if name in PUNKT_MODELS else "english"


def _items(path: str) -> list[str]:
  """The lines of a `punkt_tab` file without their `\\n`, as NLTK's `PunktDecoder` reads them."""
  with open(path, encoding="utf-8") as f:
    return [line[:-1] if line.endswith("\n") else line for line in f]


@functools.lru_cache(maxsize=None)
def _splitter(model: str):
  """NLTK's Punkt tokenizer with the bundled parameters of `model` (imported here: NLTK takes seconds)."""
  from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
  files = ("abbrev_types.txt", "sent_starters.txt", "collocations.tab", "ortho_context.tab")
  abbrevs, starters, collocations, ortho = (_items(os.path.join(PUNKT_DIR, model, f)) for f in files)
  params = PunktParameters()
  params.abbrev_types, params.sent_starters = set(abbrevs), set(starters)
  params.collocations = {tuple(line.split("\t")) for line in collocations}
  rows = (line.split("\t") for line in ortho)
  params.ortho_context = collections.defaultdict(int, {word: int(flags) for word, flags in rows})
  return PunktSentenceTokenizer(params)


def sentences(text: str, most: int = 2, language: str = "english") -> list[str]:
  """The first `most` sentences of `text` by Punkt for `language` (module docstring), stripped, empty ones
  dropped."""
  parts = (s.strip() for s in _splitter(punkt_model(language)).tokenize(text.strip()))
  return [s for s in parts if s][:most]


def file_language(path: str) -> str:
  """The MLDoc language a file name names (`german.test`, `spanish-latam.dev`), else `english`."""
  name = os.path.basename(path).split(".")[0].split("-")[0]
  return name if name in MLDOC_LANGUAGES.values() else "english"


def document(path: str, lineno: int, text: str) -> str:
  """A row's document: the text, or the decoded `b'...'` literal of the official script under Python 3."""
  text = text.strip()
  if not text.startswith(("b'", 'b"')):
    return text
  try:
    value = ast.literal_eval(text)
  except (SyntaxError, ValueError) as e:
    why = e.msg if isinstance(e, SyntaxError) else str(e)
    raise malformed(path, lineno, f"a bytes literal b'...' that does not parse ({why}); expected "
                    "`LABEL<TAB>b'...'` as generate_documents.py writes it, or `LABEL<TAB>document`") from None
  if not isinstance(value, bytes):
    raise malformed(path, lineno, f"{type(value).__name__} where a bytes literal b'...' was expected")
  try:
    return value.decode("utf-8")
  except UnicodeDecodeError as e:
    raise malformed(path, lineno, f"the bytes literal is not UTF-8 (byte {e.start}: 0x{value[e.start]:02x}, "
                    f"{e.reason}); expected the UTF-8 bytes generate_documents.py writes") from None


def read(path: str, language: Optional[str] = None) -> list[dict]:
  """The documents of one MLDoc file as sentence pairs (module docstring); ids `<file name>-<i>`. `language`
  (code or English name) picks the splitter; by default the file name's."""
  name, out, model = os.path.basename(path), [], punkt_model(language or file_language(path))
  for n, line in numbered_lines(path, "`LABEL<TAB>document` rows"):
    if not line.strip():
      continue
    label, tab, text = line.partition("\t")
    if not tab:
      raise malformed(path, n, "no tab; expected `LABEL<TAB>document`")
    if label.strip() not in LABELS:
      raise malformed(path, n, f"unknown label {label.strip()!r}; valid labels: {', '.join(LABELS)}")
    first_two = sentences(document(path, n, text), language=model) + ["", ""]
    out.append({"id": f"{name}-{len(out)}", "text_a": first_two[0], "text_b": first_two[1], "label": label.strip()})
  if not out:
    raise errors.DataError(f"{path} holds no documents; expected `LABEL<TAB>document` rows")
  return out
