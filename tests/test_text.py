"""The text sanitizer as an NLP privacy engineer uses it: an embedding file and a text file in,
the sanitized text out, from Python and from the command line."""

from __future__ import annotations

import json
import re
import struct

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from certdp.audit import audit_file
from certdp.cli import main
from certdp.space import neighbor_pairs
from certdp.text import WORD, TextSanitizer

from .mechanism_checks import check_exact_mdp, check_probabilities, check_sampling, check_save_load

WORDS = ["the", "cat", "dog", "sat", "ran", "mat", "rug", "home", "walked", "house", "big", "small"]


def write_npy(folder, words=WORDS, dim=4, seed=0):
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((len(words), dim))
    np.save(folder / "emb.npy", vecs)
    (folder / "emb.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    return folder / "emb.npy", vecs


def write_bin(folder, words, vecs):
    """The word2vec binary format: a 'count dim' line, then each word, a space, dim float32."""
    with open(folder / "emb.bin", "wb") as f:
        f.write(f"{len(words)} {vecs.shape[1]}\n".encode())
        for w, v in zip(words, vecs):
            f.write(w.encode() + b" " + struct.pack(f"<{len(v)}f", *v.astype(np.float32)) + b"\n")
    return folder / "emb.bin"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("emb")
    npy, vecs = write_npy(folder)
    return folder, npy, vecs


@pytest.fixture(scope="module")
def fitted(files):
    _, npy, _ = files
    return TextSanitizer(npy, epsilon=3.0, vocabulary=10, options={"r": 3, "lambdas": [1.0]}, rng=11).fit()


def test_the_mechanism_is_certified_over_every_pair_of_vocabulary_words(fitted, tmp_path):
    m = fitted.mechanism_
    assert m.metadata["method"] == "constopt" and m.n_records == m.n_outputs == 10
    check_probabilities(m.matrix)
    edges, dist = neighbor_pairs(m.geometry.eta, m.geometry.metric, points=m.geometry.points)
    assert len(edges) == 10 * 9 // 2 == len(m.edges)
    check_exact_mdp(m.matrix, m.epsilon, edges, dist)
    check_save_load(m, tmp_path)
    check_sampling(m)
    assert audit_file(fitted.save(tmp_path / "s")).passed


def test_only_vocabulary_words_change_and_the_rest_is_kept(fitted):
    text = 'The CAT sat on a "Mat", then 3 dogs\nwalked   home.\t(Zebra!)'
    out = fitted.sanitize(text)
    # everything between words, and every word outside the vocabulary, is where it was
    assert WORD.split(out.text) == WORD.split(text)
    src, dst = WORD.findall(text), WORD.findall(out.text)
    vocab = set(fitted.words_)
    for a, b in zip(src, dst):
        if a.lower() not in vocab:
            assert a == b
        else:
            assert b.lower() in vocab
            assert (b.isupper() if a.isupper() and len(a) > 1 else True)
            assert (b[0].isupper() if a[0].isupper() else True)
    assert out.counts["words"] == len(src) == out.in_vocabulary + out.out_of_vocabulary
    assert out.replaced == len(out.replacements) == sum(a != b for a, b in zip(src, dst))
    assert out.out_of_vocabulary == sum(a.lower() not in vocab for a in src)
    for r in out.replacements:
        assert text[r.start:r.start + len(r.word)] == r.word


@settings(max_examples=40)
@given(st.lists(st.sampled_from(WORDS + ["Zebra", "x", "NASA", "don't"]) | st.text(" ,.;!?\n-\"'0123456789",
                                                                                   min_size=1, max_size=3),
                max_size=30))
def test_any_text_keeps_its_layout(fitted, pieces):
    text = "".join(pieces)
    out = fitted.sanitize(text)
    assert WORD.split(out.text) == WORD.split(text)
    assert len(WORD.findall(out.text)) == out.words


def test_draws_follow_the_mechanism(fitted):
    """The word 'cat' repeated: the replacement frequencies are the mechanism's row."""
    from scipy.stats import chisquare

    n = 3000
    san = TextSanitizer(mechanism=fitted.mechanism_, rng=np.random.default_rng(2)).fit()
    out = san.sanitize(" ".join(["cat"] * n)).text.split()
    row = fitted.words_.index("cat")
    p = fitted.mechanism_.matrix[row]
    counts = np.array([out.count(w) for w in san.words_])
    keep = p * n >= 5
    f_obs = np.append(counts[keep], counts[~keep].sum())
    f_exp = np.append(p[keep], p[~keep].sum()) * n
    ok = f_exp > 0
    assert chisquare(f_obs[ok], f_exp[ok] * f_obs[ok].sum() / f_exp[ok].sum()).pvalue > 1e-4


def test_the_word2vec_binary_format_and_a_seeded_run(files, tmp_path):
    _, _, vecs = files
    words = WORDS[:8] + ["New_York", "2010"]          # entries that are not single words are left out
    b = write_bin(tmp_path, words, vecs[:10])
    a1 = TextSanitizer(b, epsilon=2.0, method="expmech", rng=5).fit()
    assert a1.words_ == tuple(WORDS[:8])
    a2 = TextSanitizer(b, epsilon=2.0, method="expmech", rng=5).fit()
    texts = ["the cat sat on the mat", "the dog ran home"]
    assert a1.transform(texts) == a2.transform(texts)


def test_a_saved_mechanism_carries_its_words(fitted, tmp_path):
    path = fitted.save(tmp_path / "vocab")
    again = TextSanitizer(mechanism=path, rng=1).fit()
    assert again.words_ == fitted.words_
    from certdp import build_space, solve
    from certdp.datasets import gaussian
    other = solve(build_space(gaussian(5, 2, seed=0), epsilon=1.0, eta=float("inf"), seed=0), "expmech").mechanism
    with pytest.raises(ValueError, match="vocabulary"):
        TextSanitizer(mechanism=other).fit()


def test_bad_arguments_are_refused(files, fitted):
    _, npy, _ = files
    with pytest.raises(ValueError, match="not fitted"):
        TextSanitizer(npy, epsilon=1.0).sanitize("the cat")
    with pytest.raises(ValueError, match="embeddings and epsilon"):
        TextSanitizer(npy).fit()
    with pytest.raises(ValueError, match="epsilon"):
        TextSanitizer(npy, epsilon=0.0, method="expmech").fit()
    with pytest.raises(ValueError, match="vocabulary"):
        TextSanitizer(npy, epsilon=1.0, vocabulary=1).fit()
    with pytest.raises(ValueError, match="no matrix"):
        TextSanitizer(npy, epsilon=1.0, method="madlib").fit()
    with pytest.raises(TypeError, match="does not take"):
        TextSanitizer(npy, epsilon=1.0, method="expmech", options={"r": 3}).fit()
    with pytest.raises(ValueError, match="not found"):
        TextSanitizer(npy.with_name("missing.npy"), epsilon=1.0).fit()
    with pytest.raises(TypeError, match="str"):
        fitted.sanitize(b"the cat")
    with pytest.raises(TypeError, match="list of texts"):
        fitted.transform("the cat")


# ---------------------------------------------------------------------- the command line
def run(args, text="", **kw):
    return CliRunner().invoke(main, args, input=text.encode() if isinstance(text, str) else text, **kw)


def test_cli_sanitizes_stdin_to_stdout_with_the_report_on_stderr(files, tmp_path):
    _, npy, _ = files
    text = "The cat sat on the mat.\nA big dog walked home!\n"
    r = run(["sanitize", "--embeddings", str(npy), "--epsilon", "2", "--method", "expmech", "--seed", "3", "--pairs",
             "--save", str(tmp_path / "m")], text)
    assert r.exit_code == 0, r.stderr
    assert WORD.split(r.stdout) == WORD.split(text)
    assert "in the vocabulary of 12" in r.stderr and "not protected" in r.stderr
    assert re.search(r"^\d+\t\w+ -> \w+$", r.stderr, re.M) or "0 replaced" in r.stderr
    # the saved mechanism is reused, with the same draws for the same seed
    r2 = run(["sanitize", "--mechanism", str(tmp_path / "m.npz"), "--seed", "3", "--json"], text)
    assert r2.exit_code == 0, r2.stderr
    assert r2.stdout == r.stdout
    report = json.loads(r2.stderr)
    assert report["vocabulary"] == 12 and report["words"] == 11 and report["method"] == "expmech"


@pytest.mark.parametrize("args,text,match", [
    (["--epsilon", "1"], "the cat", "--embeddings and --epsilon are required"),
    (["--embeddings", "NOPE.npy", "--epsilon", "1"], "the cat", "NOPE.npy"),
    (["--embeddings", "EMB", "--epsilon", "-1", "--method", "expmech"], "the cat", "epsilon"),
    (["--embeddings", "EMB", "--epsilon", "1", "--vocabulary", "1"], "the cat", "--vocabulary"),
    (["--embeddings", "EMB", "--epsilon", "1", "--method", "expmech", "--r", "3"], "the cat", "--r and --lambdas"),
    (["--embeddings", "EMB", "--epsilon", "1", "--lambdas", "a,b"], "the cat", "--lambdas"),
    (["--embeddings", "EMB", "--epsilon", "1", "--method", "expmech"], b"\xff\xfe bad", "not UTF-8"),
    (["--embeddings", "EMB", "--epsilon", "1", "--method", "expmech", "--seed", "-2"], "the cat", "--seed"),
    (["--mechanism", "EMB", "--epsilon", "1"], "the cat", "drop --embeddings/--epsilon"),
    (["--embeddings", "EMB", "--epsilon", "1", "--method", "expmech", "--save", "DIR"], "the cat", "--save"),
])
def test_cli_bad_input_is_one_line_exit_2_and_nothing_written(files, tmp_path, args, text, match):
    _, npy, _ = files
    args = [a.replace("EMB", str(npy)).replace("DIR", str(tmp_path)) for a in args]
    r = run(["sanitize", *args], text)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert r.stdout == ""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and re.search(match, lines[0]), r.stderr
    assert not list(tmp_path.glob("*.npz"))
