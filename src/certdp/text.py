"""Text in, sanitized text out: word-level metric DP over an embedding's vocabulary.

An NLP privacy engineer has texts and a word embedding (a word2vec ``.bin``, or a ``.npy``
matrix with its words one per line in a ``.txt``, as the ``embedding:`` datasets read).
:class:`TextSanitizer` replaces each word of the vocabulary by a word drawn from one certified
mechanism over the vocabulary, and keeps everything else as it was: punctuation, whitespace,
case, and words outside the vocabulary. :meth:`TextSanitizer.sanitize` says what it changed.

How the mechanism is built
--------------------------
* The vocabulary V is the first ``vocabulary`` words of the embedding file that are single
  words (letters, with inner apostrophes: what the tokenizer finds in a text), one per
  distinct vector. Word2vec files list the most frequent words first, so this is the N most
  frequent words. V is fixed by the file alone, never by the texts (a vocabulary read off
  the texts would itself disclose which words they hold).
* ONE mechanism M over V, records and outputs both V, the loss the embedding distance
  (paper 002's setting), built by :func:`certdp.solve`. The default, ``'constopt'``, is paper
  002's ConstOPTMech (Algorithm 1): each word's ``r`` nearest words get probabilities of their
  own from the LP, and every other word follows the weighted exponential mechanism. It is not
  one mechanism per word: per-word mechanisms over each word's nearest words would give two
  far-apart words disjoint supports, and an output one of them can produce and the other
  cannot distinguishes them with certainty. Theorem 2 of paper 002 proves the glued matrix
  epsilon-mDP across all words, and the matrix is checked exactly on every pair before use.
* The cost grows with the vocabulary: the mechanism is a |V| x |V| matrix, and its exact check
  covers |V|^2 / 2 pairs times |V| outputs; paper 002's LP has |V| r + |V| + 1 variables with
  dense rows over the |V| weights (``benchmarks/paper002/sanitizer.py`` measures the build
  against the vocabulary size). A mechanism is built once, saved (:meth:`TextSanitizer.save`,
  the words travel in the file) and loaded for every later text (``mechanism=FILE``).

The guarantee, exactly
----------------------
With ``eta = inf`` (the default): for all words u, v of V and every word w,
``Pr[M(u) = w] <= exp(epsilon d(u, v)) Pr[M(v) = w]``, d the Euclidean distance between their
vectors. Each word of a text is replaced independently, so two texts that differ only in
vocabulary words at the same positions (u_1..u_m against v_1..v_m) give any sanitized text
with probabilities within a factor ``exp(epsilon sum_i d(u_i, v_i))``. With a finite ``eta``
only pairs within eta are bound directly; a far pair is bound along chains of such pairs
(epsilon times the shortest chain), and words with no chain between them are not protected
from each other. Not protected at all: words outside V (kept as they are), the text's layout
(lengths, punctuation, positions of the words) and the case pattern of each word.

>>> import numpy as np, tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> rng = np.random.default_rng(0)
>>> np.save(folder / "toy.npy", rng.standard_normal((6, 3)))
>>> _ = (folder / "toy.txt").write_text("the\\ncat\\ndog\\nsat\\nran\\nmat\\n")
>>> s = TextSanitizer(folder / "toy.npy", epsilon=2.0, method="expmech", rng=3).fit()
>>> out = s.sanitize("The cat sat, on the mat!")
>>> out.counts
{'words': 6, 'in_vocabulary': 5, 'replaced': 4, 'unchanged': 1, 'out_of_vocabulary': 1}
>>> out.text
'The the mat, on cat the!'
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from . import _validate as V
from .datasets import build_space, vocabulary
from .mechanism import Mechanism
from .progress import Progress
from .randomness import RNGLike, as_generator
from .solve import solve

__all__ = ["WORD", "Sanitized", "TextSanitizer"]

log = logging.getLogger(__name__)

WORD = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)*")
"""A word of a text: letters, with apostrophes inside (``don't``). Everything between two
words (spaces, punctuation, digits, line breaks) is kept as it is."""

SAMPLED_METHODS = ("madlib", "laplace")


@dataclass(frozen=True)
class Replacement:
    """One word that was replaced: where it starts in the input, the word, and its replacement."""

    start: int
    word: str
    replacement: str


@dataclass(frozen=True)
class Sanitized:
    """A sanitized text and what changed.

    Attributes:
        text: the sanitized text.
        words: words found in the input.
        in_vocabulary: of those, words of the vocabulary (each one drawn from the mechanism).
        replaced: draws that gave another word.
        out_of_vocabulary: words kept as they are (not protected).
        replacements: every replaced word (:class:`Replacement`), in the order of the text.
    """

    text: str
    words: int
    in_vocabulary: int
    replaced: int
    out_of_vocabulary: int
    replacements: tuple[Replacement, ...] = field(default=(), repr=False)

    @property
    def unchanged(self) -> int:
        """Vocabulary words whose draw gave the word itself."""
        return self.in_vocabulary - self.replaced

    @property
    def counts(self) -> dict[str, int]:
        """The counts as a dictionary (for a report or JSON)."""
        return {"words": self.words, "in_vocabulary": self.in_vocabulary, "replaced": self.replaced,
                "unchanged": self.unchanged, "out_of_vocabulary": self.out_of_vocabulary}


def _cased(word: str, like: str) -> str:
    """``word`` written in the case pattern of ``like`` (UPPER, Title, or as it is)."""
    if len(like) > 1 and like.isupper():
        return word.upper()
    if like[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


class TextSanitizer(TransformerMixin, BaseEstimator):
    """Replace each vocabulary word of a text by a word drawn from a certified mechanism.

    Args:
        embeddings: the embedding file: word2vec ``.bin``, or ``.npy`` with its words in
            ``words`` (default: the same name with ``.txt``). Not needed with ``mechanism``.
        epsilon: privacy budget per unit of embedding distance.
        vocabulary: how many words, from the top of the file, the mechanism covers (default
            500; see the module docstring for the cost of more).
        words: the word list of a ``.npy`` file.
        eta: neighbour threshold in embedding distance (default ``inf``: every pair of
            vocabulary words is protected, as in paper 002).
        method: how :func:`certdp.solve` builds the mechanism (default ``'constopt'``, paper
            002's ConstOPTMech; ``'expmech'``, ``'optmech'``, ``'spanner'``, ``'lp'`` ... also).
        options: the method's options (``{"r": 10, "lambdas": [1.0]}``), checked by solve.
        mechanism: a mechanism file written by :meth:`save` (audited on loading) or a
            :class:`~certdp.Mechanism` carrying its words in ``metadata['words']``.
        seed: seed of anything the build samples (recorded in the mechanism).
        rng: randomness of the draws: None (default) is the operating system's secure
            generator; an int or a numpy Generator gives reproducible draws.
        progress: a callback for the build's progress.

    Attributes (after :meth:`fit`):
        mechanism_: the certified mechanism over the vocabulary.
        result_: the :class:`~certdp.SolveResult` of the build (None when loaded).
        words_: the vocabulary, in the mechanism's record order.
    """

    def __init__(self, embeddings: str | Path | None = None, *, epsilon: float | None = None,
                 vocabulary: int = 500, words: str | Path | None = None, eta: float = float("inf"),
                 method: str = "constopt", options: Mapping[str, Any] | None = None,
                 mechanism: str | Path | Mechanism | None = None, seed: int | None = None, rng: RNGLike = None,
                 progress: Progress | None = None) -> None:
        self.embeddings = embeddings
        self.epsilon = epsilon
        self.vocabulary = vocabulary
        self.words = words
        self.eta = eta
        self.method = method
        self.options = options
        self.mechanism = mechanism
        self.seed = seed
        self.rng = rng
        self.progress = progress

    def fit(self, X: Any = None, y: Any = None) -> "TextSanitizer":
        """Build (or load) the mechanism over the vocabulary. ``X`` and ``y`` are ignored: the
        mechanism depends on the embedding file only, never on the texts."""
        if self.mechanism is not None:
            mech = self.mechanism if isinstance(self.mechanism, Mechanism) else Mechanism.load(self.mechanism)
            words = mech.metadata.get("words")
            if (not isinstance(words, list) or len(words) != mech.n_records
                    or not all(isinstance(w, str) for w in words)):
                raise ValueError("mechanism: it does not carry its vocabulary (metadata 'words', one per record); "
                                 "write it with TextSanitizer.save")
            if mech.output_records is None or mech.n_outputs != mech.n_records:
                raise ValueError("mechanism: its outputs must be the vocabulary's words")
            self.result_ = None
        else:
            if self.embeddings is None or self.epsilon is None:
                raise ValueError("embeddings and epsilon are required to build a mechanism (or give mechanism=FILE)")
            if self.method in SAMPLED_METHODS:
                raise ValueError(f"method {self.method!r} gives no matrix to draw from; choose one that does "
                                 "(constopt, expmech, optmech, spanner, lp, outputs)")
            ds = vocabulary(self.embeddings, V.int_in_range("vocabulary", self.vocabulary, 2), words=self.words,
                            pattern=WORD)
            space = build_space(ds, epsilon=self.epsilon, eta=self.eta, seed=self.seed)
            log.info("building %s over a vocabulary of %d words (eps=%g, eta=%g)", self.method, space.n_records,
                     space.epsilon, space.eta)
            res = solve(space, self.method, progress=self.progress, **dict(self.options or {}))
            assert isinstance(res.mechanism, Mechanism)   # a method with a matrix (checked above)
            mech = res.mechanism
            words = list(ds.labels or ())
            mech = mech.with_metadata(words=words)
            self.result_ = res
        self.mechanism_ = mech
        self.words_ = tuple(words)
        self._exact = {w: i for i, w in enumerate(words)}
        lower: dict[str, int] = {}
        for i, w in enumerate(words):
            if w == w.lower():
                lower.setdefault(w, i)
        self._lower = lower
        assert mech.output_records is not None   # the vocabulary's words (checked or built so)
        self._outputs = [words[r] for r in mech.output_records]
        # secure draws by default; a seed gives one generator for the sanitizer's lifetime, so
        # that successive texts get fresh but reproducible draws
        self._generator = None if self.rng is None else as_generator(self.rng)
        return self

    def _lookup(self, token: str) -> int | None:
        i = self._exact.get(token)
        return self._lower.get(token.lower()) if i is None else i

    def sanitize(self, text: str) -> Sanitized:
        """Sanitize one text: each vocabulary word is replaced by a draw from the mechanism
        (in the word's case pattern when it was matched through its lower case), everything
        else is kept. Returns the text with counts and the list of replacements."""
        if not hasattr(self, "mechanism_"):
            raise ValueError("this TextSanitizer is not fitted yet: call fit() first")
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        spans = [(m.start(), m.end(), m.group()) for m in WORD.finditer(text)]
        hits = [(k, self._lookup(t)) for k, (_, _, t) in enumerate(spans)]
        known = [(k, i) for k, i in hits if i is not None]
        drawn = (self.mechanism_.perturb(np.array([i for _, i in known], dtype=np.int64), rng=self._generator)
                 if known else np.empty(0, dtype=np.int64))
        new = {k: self._outputs[o] for (k, _), o in zip(known, drawn.tolist())}
        parts: list[str] = []
        reps: list[Replacement] = []
        pos = 0
        for k, (a, b, tok) in enumerate(spans):
            parts.append(text[pos:a])
            if k in new and new[k] != self.words_[hits[k][1]]:       # type: ignore[index]
                out = new[k] if tok in self._exact else _cased(new[k], tok)
                parts.append(out)
                reps.append(Replacement(a, tok, out))
            else:
                parts.append(tok)
            pos = b
        parts.append(text[pos:])
        return Sanitized(text="".join(parts), words=len(spans), in_vocabulary=len(known), replaced=len(reps),
                         out_of_vocabulary=len(spans) - len(known), replacements=tuple(reps))

    def transform(self, X: Iterable[str]) -> list[str]:
        """The sanitized text of each text in ``X``."""
        if isinstance(X, str):
            raise TypeError("X must be a list of texts; sanitize(text) takes a single one")
        return [self.sanitize(t).text for t in X]

    def fit_transform(self, X: Iterable[str], y: Any = None, **fit_params: Any) -> list[str]:
        """:meth:`fit` (which ignores ``X``), then :meth:`transform` of ``X``."""
        return self.fit(X, y).transform(X)

    def save(self, path: str | Path) -> Path:
        """Write the fitted mechanism with its words (``.npz``); load it with ``mechanism=PATH``."""
        if not hasattr(self, "mechanism_"):
            raise ValueError("this TextSanitizer is not fitted yet: call fit() first")
        return self.mechanism_.save(path)
