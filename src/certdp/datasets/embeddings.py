"""Word embeddings: a ``.npy`` matrix with a word list, or the word2vec binary format."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from .. import _validate as V
from .._io import input_file, read_bytes
from ..randomness import RNGLike, as_generator
from .base import Dataset


def read_word2vec_bin(path: str | Path, limit: int | None = None) -> tuple[list[str], np.ndarray]:
    """Read the word2vec binary format: a header line ``count dim``, then for each word the
    word's bytes, a space, and ``dim`` little-endian float32 values (optionally a newline).

    Returns the words and a (count, dim) float64 array. ``limit`` keeps only the first words.
    """
    p = Path(path)
    data = read_bytes(p, "word2vec file")
    nl = data.find(b"\n")
    try:
        count, dim = (int(x) for x in data[:nl].split())
    except ValueError:
        raise ValueError(f"{p} does not start with a 'count dim' header line") from None
    if count < 1 or dim < 1:
        raise ValueError(f"{p}: header says {count} words of dimension {dim}")
    if limit is not None:
        count = min(count, V.int_in_range("limit", limit, 1))
    if count * (4 * dim + 2) > len(data):          # each word: at least one byte, a space and its floats
        raise ValueError(f"{p}: header says {count:,} words of dimension {dim}, more than its "
                         f"{len(data):,} bytes can hold (a truncated or damaged file)")
    words: list[str] = []
    vecs = np.empty((count, dim), dtype=np.float32)
    pos = nl + 1
    nbytes = 4 * dim
    for t in range(count):
        while pos < len(data) and data[pos:pos + 1] in (b"\n", b" "):
            pos += 1
        sp = data.find(b" ", pos)
        if sp < 0 or sp + 1 + nbytes > len(data):
            raise ValueError(f"{p} is truncated at word {t} of {count}")
        words.append(data[pos:sp].decode("utf-8", errors="replace"))
        vecs[t] = np.frombuffer(data, dtype="<f4", count=dim, offset=sp + 1)
        pos = sp + 1 + nbytes
    return words, vecs.astype(np.float64)


def read_npy_words(npy: str | Path, words: str | Path | None = None) -> tuple[list[str], np.ndarray]:
    """Read an embedding matrix from ``.npy`` (real numbers: complex, boolean, string or object
    arrays are refused, never converted) and its words (one per line, UTF-8) from ``words``
    (default: the same path with ``.txt``)."""
    p = input_file(npy, "embedding file")
    try:
        raw = np.load(p, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise ValueError(f"{p} is not a readable .npy array ({reason})") from None
    if not isinstance(raw, np.ndarray):
        raise ValueError(f"{p} holds several arrays (.npz); an embedding file holds one (words x dim) array")
    vecs = V.real_array(f"the vectors of {p}", raw)
    if vecs.ndim != 2:
        raise ValueError(f"{p} must hold a 2-D (words x dim) array, got shape {vecs.shape}")
    wp = Path(words) if words is not None else p.with_suffix(".txt")
    if words is not None or wp.exists():
        try:
            wl = read_bytes(wp, "word list").decode("utf-8").splitlines()
        except UnicodeDecodeError as exc:
            raise ValueError(f"word list {wp} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        if len(wl) != len(vecs):
            raise ValueError(f"{wp} has {len(wl)} words but {p} has {len(vecs)} vectors")
    else:
        wl = [str(i) for i in range(len(vecs))]
    return wl, vecs


def _read_distinct(p: Path, words: str | Path | None) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Words, vectors, and the sorted indices of the first occurrence of each distinct vector."""
    wl, vecs = read_word2vec_bin(p) if p.suffix == ".bin" else read_npy_words(p, words)
    if not np.all(np.isfinite(vecs)):
        raise ValueError(f"{p} contains NaN or inf vectors")
    _, first = np.unique(vecs, axis=0, return_index=True)
    return wl, vecs, np.sort(first)


def embeddings(path: str | Path, n: int | None = None, seed: RNGLike = None,
               words: str | Path | None = None) -> Dataset:
    """Records = ``n`` words (a seeded sample; all when None) of an embedding file (``.npy``
    with a word list, or word2vec ``.bin``); Euclidean distance between vectors. Words whose
    vectors repeat an earlier word's are dropped (records must be distinct points)."""
    p = Path(path)
    wl, vecs, cand = _read_distinct(p, words)
    if n is None:
        chosen = cand
    else:
        n = V.int_in_range("n", n, 2)
        if n > len(cand):
            raise ValueError(f"n={n} exceeds the {len(cand)} distinct vectors in {p}")
        chosen = np.sort(as_generator(seed).choice(cand, size=n, replace=False))
    return Dataset(points=vecs[chosen], metric="euclidean", name=f"embedding:{p.name}:{len(chosen)}",
                   labels=tuple(wl[i] for i in chosen))


def clustered_vocabulary(vectors: np.ndarray, n: int, *, close: int = 50, p_random: float = 0.5,
                         seed: RNGLike = None) -> np.ndarray:
    """Indices of ``n`` distinct words sampled as in paper 002, section 5.1: start from one
    random word; then, with probability ``p_random`` add a random word, otherwise pick a word
    already chosen and add one of its ``close`` nearest words (Euclidean). Repeats are skipped,
    so the result has exactly ``n`` distinct indices (in the order they were added)."""
    X = V.finite_array("vectors", vectors, ndim=2)
    n = V.int_in_range("n", n, 1, len(X))
    close = V.int_in_range("close", close, 1)
    p_random = V.open_unit("p_random", p_random, upper_closed=True)
    rng = as_generator(seed)
    chosen: list[int] = [int(rng.integers(len(X)))]
    seen = set(chosen)
    sq = np.einsum("ij,ij->i", X, X)
    attempts = 0
    while len(chosen) < n:
        attempts += 1
        if attempts > 1000 * n:
            raise RuntimeError("clustered sampling could not find new words; lower n or raise close")
        if rng.random() < p_random:
            cand = int(rng.integers(len(X)))
        else:
            w = chosen[int(rng.integers(len(chosen)))]
            d2 = sq - 2.0 * X @ X[w] + sq[w]
            d2[w] = np.inf
            near = np.argpartition(d2, min(close, len(X) - 2))[:close]
            cand = int(near[int(rng.integers(len(near)))])
        if cand not in seen:
            seen.add(cand)
            chosen.append(cand)
    return np.asarray(chosen, dtype=np.int64)


def clustered_embeddings(path: str | Path, n: int, *, seed: RNGLike = None, close: int = 50,
                         words: str | Path | None = None) -> Dataset:
    """A vocabulary of ``n`` words drawn from an embedding file with
    :func:`clustered_vocabulary` (duplicate vectors removed first)."""
    p = Path(path)
    wl, vecs, cand = _read_distinct(p, words)
    idx = cand[clustered_vocabulary(vecs[cand], n, close=close, seed=seed)]
    return Dataset(points=vecs[idx], metric="euclidean", name=f"clustered:{p.name}:{n}",
                   labels=tuple(wl[i] for i in idx))


def vocabulary(path: str | Path, n: int | None = None, *, words: str | Path | None = None,
               pattern: str | re.Pattern[str] | None = None) -> Dataset:
    """The first ``n`` words of an embedding file (all when None or fewer), in the file's order
    (word2vec files list the most frequent words first): no sampling, so the vocabulary is
    public and the same on every run. Only entries that ``pattern`` matches in full are kept
    (default: every entry), and an entry whose vector repeats an earlier one is dropped
    (records must be distinct points). Euclidean distance between vectors."""
    p = Path(path)
    wl, vecs, cand = _read_distinct(p, words)
    if pattern is not None:
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        cand = np.array([i for i in cand if rx.fullmatch(wl[i])], dtype=np.int64)
    if n is not None:
        cand = cand[:V.int_in_range("n", n, 2)]
    if len(cand) < 2:
        raise ValueError(f"{p} has fewer than two usable distinct words")
    return Dataset(points=vecs[cand], metric="euclidean", name=f"vocabulary:{p.name}:{len(cand)}",
                   labels=tuple(wl[i] for i in cand))
