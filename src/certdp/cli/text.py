"""``certdp sanitize``: a text on stdin, the sanitized text on stdout, the report on stderr."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .. import _validate as V
from ..text import TextSanitizer
from .._io import read_bytes
from .common import Live, OutputPath, PathArg, Real, friendly_errors, main


def _read_text(input_path: str) -> str:
    try:
        if input_path == "-":
            return sys.stdin.buffer.read().decode("utf-8")
        return read_bytes(input_path, "--input").decode("utf-8")
    except UnicodeDecodeError:
        where = "standard input" if input_path == "-" else f"--input {input_path}"
        raise ValueError(f"{where} is not UTF-8 text") from None


@main.command()
@click.option("--embeddings", type=PathArg(dir_okay=False), default=None,
              help="word2vec .bin, or .npy with its words in a .txt of the same name (or --words)")
@click.option("--words", type=PathArg(dir_okay=False), default=None, help="the word list of a .npy file")
@click.option("--epsilon", type=float, default=None, help="privacy budget per unit of embedding distance")
@click.option("--vocabulary", type=int, default=500, show_default=True,
              help="how many words from the top of the file the mechanism covers")
@click.option("--eta", type=Real(allow_inf=True), default=float("inf"), show_default=True,
              help="neighbour threshold in embedding distance ('inf': every pair of vocabulary words)")
@click.option("--method", type=click.Choice(["constopt", "expmech", "optmech", "spanner", "lp", "outputs"]),
              default="constopt", show_default=True, help="how the mechanism is built (certdp solve's methods)")
@click.option("--r", "r", type=int, default=None, help="constopt: nearest words left to the LP [10]")
@click.option("--lambdas", default=None, help="constopt: penalties to sweep [0.001,0.1,1,10,50]")
@click.option("--mechanism", "mechanism_path", type=PathArg(dir_okay=False), default=None,
              help="use a mechanism written by --save (audited first) instead of building one")
@click.option("--save", "save_path", type=OutputPath(".npz"), default=None,
              help="write the mechanism, with its words, for later runs (.npz added when missing)")
@click.option("--input", "input_path", type=PathArg(dir_okay=False, allow_dash=True), default="-", show_default=True,
              help="the text (UTF-8); - for stdin")
@click.option("--pairs", is_flag=True, help="also list every replacement (word -> replacement) on stderr")
@click.option("--json", "as_json", is_flag=True, help="the report on stderr as one JSON object")
@click.option("--seed", type=int, default=None, help="reproducible draws (default: OS secure randomness)")
@click.option("--quiet", is_flag=True, help="no progress line and no report on stderr")
def sanitize(embeddings: str | None, words: str | None, epsilon: float | None, vocabulary: int, eta: float,
             method: str, r: int | None, lambdas: str | None, mechanism_path: str | None, save_path: Path | None,
             input_path: str, pairs: bool, as_json: bool, seed: int | None, quiet: bool) -> None:
    """Replace each vocabulary word of a text by a word drawn from a certified mechanism over
    the vocabulary (paper 002's setting); punctuation, case, spacing and words outside the
    vocabulary are kept. The text is read from stdin and written to stdout; what changed goes to
    stderr. Every pair of vocabulary words u, v is protected at epsilon times their embedding
    distance; words outside the vocabulary are not protected."""
    from ..solve import parse_numbers

    with friendly_errors():
        if mechanism_path is None and (embeddings is None or epsilon is None):
            raise ValueError("--embeddings and --epsilon are required (or --mechanism FILE)")
        if mechanism_path is not None and (embeddings is not None or epsilon is not None):
            raise ValueError("--mechanism takes the vocabulary and epsilon from its file; drop --embeddings/--epsilon")
        if seed is not None:
            V.int_in_range("--seed", seed, 0)
        V.int_in_range("--vocabulary", vocabulary, 2)
        options: dict[str, object] = {}
        if r is not None:
            options["r"] = r
        if lambdas is not None:
            options["lambdas"] = parse_numbers("--lambdas", lambdas)
        if options and method != "constopt":
            raise ValueError(f"--r and --lambdas are options of --method constopt, not {method}")
        target = save_path
        text = _read_text(input_path)
        with Live(f"sanitize: {method} over {vocabulary} words", quiet=quiet) as live:
            s = TextSanitizer(embeddings, epsilon=epsilon, vocabulary=vocabulary, words=words, eta=eta, method=method,
                              options=options, mechanism=mechanism_path, rng=seed, progress=live).fit()
        saved = s.save(target) if target is not None else None
        result = s.sanitize(text)
    sys.stdout.write(result.text)
    sys.stdout.flush()
    if quiet:
        return
    m = s.mechanism_
    assert m.geometry is not None   # built by Mechanism.certified or loaded from an audited file
    if as_json:
        report = {**result.counts, "vocabulary": m.n_records, "epsilon": m.epsilon, "eta": m.geometry.eta,
                  "method": m.metadata.get("method"), "saved": str(saved) if saved else None}
        if pairs:
            report["replacements"] = [[x.start, x.word, x.replacement] for x in result.replacements]
        click.echo(json.dumps(report), err=True)
        return
    c = result.counts
    click.echo(f"sanitize: {c['words']} words; {c['in_vocabulary']} in the vocabulary of {m.n_records} "
              f"({c['replaced']} replaced, {c['unchanged']} drawn unchanged); {c['out_of_vocabulary']} outside it, "
              f"kept and not protected. Guarantee: epsilon {m.epsilon:g} x embedding distance between any two "
              f"vocabulary words{'' if m.geometry.eta == float('inf') else f' within eta {m.geometry.eta:g}'} "
              f"({m.metadata.get('method')}, audited).", err=True)
    if saved:
        click.echo(f"mechanism written to {saved}", err=True)
    if pairs:
        for x in result.replacements:
            click.echo(f"{x.start}\t{x.word} -> {x.replacement}", err=True)
