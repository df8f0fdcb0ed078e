"""Token-efficiency reports (polytok.report, polytok report): counts equal
the reference libraries', the statistics behave as their definitions say,
every format, bad input, and the HTML page in a real headless browser."""

from __future__ import annotations

import base64
import csv
import io
import json
import math
import random
import re
import shutil
import subprocess
import tarfile
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

import polytok
from polytok.cli import main
from polytok.report import ParallelCorpus, gini, lorenz, read_corpus, renyi_efficiency
from conftest import CORPORA, FLORES

LANGUAGES = ("en", "de", "zh", "hi", "ar", "ja")


@pytest.fixture(scope="module")
def corpus() -> ParallelCorpus:
    return read_corpus(CORPORA)


@pytest.fixture(scope="module")
def small(corpus) -> ParallelCorpus:
    """Six languages of the shipped corpus."""
    return ParallelCorpus({lang: corpus.lines[lang] for lang in LANGUAGES}, "small", {})


@pytest.fixture(scope="module")
def trained() -> polytok.BPETokenizer:
    return polytok.BPETokenizer.train(CORPORA, vocab_size=2000, progress=False)


def per_language(report, tokenizer: str, key: str = "tokens") -> dict[str, object]:
    return {r["language"]: r[key] for r in report.rows if r["tokenizer"] == tokenizer}


# ------------------------------------------------------- exact token counts


def test_cl100k_counts_equal_tiktoken(corpus, cl100k, tiktoken_cl100k):
    report = polytok.report(corpus, [("cl100k", cl100k)], bootstrap=0, progress=False)
    for language, lines in corpus.lines.items():
        expected = sum(map(len, tiktoken_cl100k.encode_ordinary_batch(lines)))
        assert report.row(language)["tokens"] == expected, language


def test_composed_tokenizers_are_measured_by_their_model(corpus, cl100k, tiktoken_cl100k, bert_files, tmp_path):
    """A tokenizer composed around a model (as tokenizer.json files of
    GPT-NeoX, Llama 3 or a BERT with added tokens load) is measured as
    its pipeline encodes."""
    composed = polytok.Tokenizer(
        cl100k, pre_tokenizer=cl100k.pre_tokenizer, post_processor=polytok.processors.ByteLevel(trim_offsets=True)
    )
    tokenizers = pytest.importorskip("tokenizers")
    reference = tokenizers.Tokenizer.from_file(str(bert_files[1]))
    reference.no_truncation()
    reference.no_padding()
    reference.add_tokens(["unbelievable"])
    reference.save(str(tmp_path / "bert.json"))
    bert = polytok.load(tmp_path / "bert.json")
    assert type(bert) is polytok.Tokenizer and type(composed) is polytok.Tokenizer
    report = polytok.report(corpus, [("composed", composed), ("bert", bert)], bootstrap=0, progress=False)
    for language, lines in corpus.lines.items():
        assert per_language(report, "composed")[language] == sum(map(len, tiktoken_cl100k.encode_ordinary_batch(lines)))
        expected = sum(len(e.ids) for e in reference.encode_batch(lines, add_special_tokens=False))
        assert per_language(report, "bert")[language] == expected, language


def test_bert_counts_equal_tokenizers(corpus, bert_files, bert_reference):
    report = polytok.report(corpus, [bert_files[0]], bootstrap=0, progress=False)
    for language, lines in corpus.lines.items():
        encodings = bert_reference.encode_batch(lines, add_special_tokens=False)
        assert report.row(language)["tokens"] == sum(len(e.ids) for e in encodings), language
        unknown = sum(e.ids.count(100) for e in encodings)  # [UNK] is id 100
        assert report.row(language)["unknown_rate"] == pytest.approx(unknown / report.row(language)["tokens"])


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_sentencepiece_counts_equal_sentencepiece(corpus, tmp_path, model_type):
    spm = pytest.importorskip("sentencepiece")
    prefix = tmp_path / model_type
    spm.SentencePieceTrainer.train(
        input=",".join(str(p) for p in sorted(CORPORA.glob("*.txt"))), model_prefix=str(prefix),
        model_type=model_type, vocab_size=3000, normalization_rule_name="identity", byte_fallback=True,
        character_coverage=0.99, minloglevel=2,
    )
    model = f"{prefix}.model"
    reference = spm.SentencePieceProcessor(model_file=model)
    report = polytok.report(corpus, [model], bootstrap=0, progress=False)
    for language, lines in corpus.lines.items():
        ids = reference.encode(lines)
        row = report.row(language)
        assert row["tokens"] == sum(map(len, ids)), language
        fallback = sum(1 for line in ids for i in line if reference.is_byte(i))
        assert row["byte_fallback_rate"] == pytest.approx(fallback / row["tokens"]), language


# ------------------------------------------------------------- statistics


def test_premium_is_a_ratio_of_totals_and_the_pivot_is_one(small, trained):
    report = polytok.report(small, [trained], pivot="en", progress=False)
    tokens = per_language(report, report.tokenizers[0])
    for language in LANGUAGES:
        row = report.row(language)
        assert row["premium"] == pytest.approx(tokens[language] / tokens["en"])
        assert row["premium_low"] <= row["premium"] <= row["premium_high"]
    pivot = report.row("en")
    assert pivot["premium"] == pivot["premium_low"] == pivot["premium_high"] == 1.0


def test_premiums_ignore_line_order_and_duplication(small, trained):
    base = polytok.report(small, [trained], bootstrap=0, progress=False)
    order = list(range(small.n_lines))
    random.Random(3).shuffle(order)
    shuffled = ParallelCorpus({k: [v[i] for i in order] for k, v in small.lines.items()}, "shuffled", {})
    doubled = ParallelCorpus({k: v + v for k, v in small.lines.items()}, "doubled", {})
    for other in (shuffled, doubled):
        again = polytok.report(other, [trained], bootstrap=0, progress=False)
        for language in LANGUAGES:
            assert again.row(language)["premium"] == pytest.approx(base.row(language)["premium"], rel=1e-12)
        assert again.summary[0]["gini"] == pytest.approx(base.summary[0]["gini"], rel=1e-12)


def test_bootstrap_intervals_shrink_with_more_lines(small, trained):
    few = ParallelCorpus({k: v[:40] for k, v in small.lines.items()}, "few", {})
    narrow = polytok.report(small, [trained], progress=False)
    wide = polytok.report(few, [trained], progress=False)
    for language in ("de", "zh", "hi"):
        width = lambda r: r.row(language)["premium_high"] - r.row(language)["premium_low"]  # noqa: E731
        assert 0 < width(narrow) < width(wide), language
    # The same seed gives the same intervals.
    again = polytok.report(small, [trained], progress=False)
    assert again.rows == narrow.rows


def test_gini_definition():
    assert gini([3.0, 3.0, 3.0]) == 0.0
    # sum_i sum_j |ci - cj| = 2 * (1 + 3 + 2) = 12; 2 n^2 mean = 2 * 9 * 7/3 = 42.
    assert gini([1.0, 2.0, 4.0]) == pytest.approx(12 / 42)
    values = [random.Random(1).random() for _ in range(50)]
    brute = sum(abs(a - b) for a in values for b in values) / (2 * len(values) ** 2 * (sum(values) / len(values)))
    assert gini(values) == pytest.approx(brute)
    assert lorenz([1.0, 1.0])[-1] == (1.0, 1.0) and lorenz([1.0, 3.0])[1] == (0.5, 0.25)


def test_equal_costs_give_a_gini_of_zero(trained):
    # The same text under two names costs the same in both.
    lines = (CORPORA / "en.txt").read_text("utf-8").splitlines()
    twin = ParallelCorpus({"en": lines, "copy": list(lines)}, "twins", {})
    report = polytok.report(twin, [trained], progress=False)
    assert report.summary[0]["gini"] == 0.0 and report.row("copy")["premium"] == 1.0


def test_renyi_efficiency():
    assert renyi_efficiency([5, 5, 5, 5], 4) == pytest.approx(1.0)
    assert renyi_efficiency([1, 0, 0, 0], 4) == pytest.approx(0.0)
    p = [0.5, 0.25, 0.25]
    expected = math.log(sum(x**2.5 for x in p)) / (1 - 2.5) / math.log(3)
    assert renyi_efficiency([2, 1, 1], 3) == pytest.approx(expected)


def test_languages_without_spaces_have_no_fertility(small, trained):
    report = polytok.report(small, [trained], progress=False)
    for language in ("zh", "ja"):
        row = report.row(language)
        assert row["spaceless"] and row["fertility"] is None and row["continued_words"] is None
        assert row["script"] == "Hani"
    row = report.row("de")
    assert row["script"] == "Latn" and row["fertility"] == pytest.approx(row["tokens"] / row["words"])
    assert 0 < row["continued_words"] < 1
    assert row["context_characters"] == pytest.approx(8192 * row["characters"] / row["tokens"])


def test_unknown_heavy_languages_are_flagged_and_left_out(small, bert_files):
    # BERT uncased covers few CJK characters: those languages fall to [UNK].
    report = polytok.report(small, [bert_files[0]], progress=False)
    flagged = {r["language"] for r in report.rows if r["flagged_unknown"]}
    assert flagged and flagged <= {"zh", "ja", "hi", "ar"}
    assert all(report.row(lang)["unknown_rate"] > 0.10 for lang in flagged)
    assert set(report.summary[0]["excluded_languages"]) == flagged
    assert report.summary[0]["languages"] == len(LANGUAGES) - len(flagged)


def test_several_tokenizers_and_the_fairest(small, trained, cl100k):
    report = polytok.report(small, [("trained", trained), ("cl100k", cl100k)], progress=False)
    assert report.tokenizers == ["trained", "cl100k"]
    assert report.fairest == min(report.summary, key=lambda s: s["gini"])["tokenizer"]
    shares = report.scripts["cl100k"]
    assert shares["Latn"] > 0.5 and sum(shares.values()) == pytest.approx(1.0)
    assert report.metadata["polytok_version"] == polytok.__version__


# ---------------------------------------------------------------- formats


def test_every_format(small, trained, tmp_path):
    report = polytok.report(small, [("trained", trained)], progress=False)
    data = json.loads(report.render("json"))
    assert data["rows"] == json.loads(json.dumps(report.rows)) and data["metadata"]["pivot"] == "en"
    rows = list(csv.DictReader(io.StringIO(report.render("csv"))))
    assert [r["language"] for r in rows] == list(LANGUAGES)
    assert float(rows[1]["premium"]) == pytest.approx(report.row("de")["premium"])
    assert "| Premium | CI low | CI high |" in report.render("md")
    table = report.render("table", width=80)
    assert all(len(line) <= 80 for line in table.splitlines()), table
    listed = [line.split()[0] for line in table.splitlines() if line.split() and line.split()[0] in LANGUAGES]
    premiums = [report.row(language)["premium"] for language in listed]
    assert sorted(listed) == sorted(LANGUAGES) and premiums == sorted(premiums, reverse=True)
    for suffix in (".json", ".csv", ".md", ".html"):
        report.save(tmp_path / f"r{suffix}")
        assert (tmp_path / f"r{suffix}").stat().st_size > 100
    pandas = pytest.importorskip("pandas")
    assert isinstance(report.to_pandas(), pandas.DataFrame)


def test_cli_report(tmp_path, trained):
    path = tmp_path / "tok.json"
    trained.save(path)
    runner = CliRunner()
    result = runner.invoke(main, ["report", str(CORPORA), "-t", str(path), "--bootstrap", "100"])
    assert result.exit_code == 0, result.output
    assert "Token premium over 24 languages" in result.output and "Gini" in result.output
    out = tmp_path / "report.json"
    result = runner.invoke(main, ["report", str(CORPORA), "-t", str(path), "-o", str(out), "--pivot", "de", "-q"])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["metadata"]["pivot"] == "de"


# -------------------------------------------------------------- bad input


def write_corpus(directory: Path, files: dict[str, bytes]) -> Path:
    directory.mkdir()
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return directory


def test_files_that_do_not_align(tmp_path, trained):
    path = write_corpus(tmp_path / "c", {"en.txt": b"a\nb\nc\n", "de.txt": b"a\nb\nc\n", "fr.txt": b"a\nb\n"})
    with pytest.raises(polytok.CorpusError, match=r"fr.txt has 2.*--truncate"):
        read_corpus(path)
    warnings = []
    cut = read_corpus(path, truncate=True, warn=warnings.append)
    assert cut.n_lines == 2 and "fr.txt" in warnings[0]
    out, tokenizer = tmp_path / "never.json", tmp_path / "tok.json"
    trained.save(tokenizer)
    result = CliRunner().invoke(main, ["report", str(path), "-t", str(tokenizer), "-o", str(out)])
    assert result.exit_code != 0 and "fr.txt has 2" in result.output and not out.exists()


def test_bad_files_are_named(tmp_path, trained):
    latin1 = write_corpus(tmp_path / "l", {"en.txt": b"ok\n", "de.txt": b"ok\ncaf\xe9\n"})
    with pytest.raises(polytok.CorpusError, match=r"de.txt: invalid UTF-8 at byte offset 6 \(line 2\)"):
        read_corpus(latin1)
    empty = write_corpus(tmp_path / "e", {"en.txt": b"ok\n", "de.txt": b""})
    with pytest.raises(polytok.CorpusError, match=r"de.txt: the file is empty"):
        read_corpus(empty)
    with pytest.raises(polytok.CorpusError, match="no such file"):
        read_corpus(tmp_path / "missing")
    with pytest.raises(ValueError, match=r"pivot language 'xx' is not in the corpus"):
        polytok.report(CORPORA, [trained], pivot="xx", progress=False)
    runner = CliRunner()
    result = runner.invoke(main, ["report", str(CORPORA), "-t", str(tmp_path / "nope.json")])
    assert result.exit_code != 0 and "nope.json" in result.output
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    result = runner.invoke(main, ["report", str(CORPORA), "-t", str(broken)])
    assert result.exit_code != 0 and "broken.json" in result.output and "Traceback" not in result.output


def test_table_files(tmp_path, trained):
    rows = [("language", "id", "text")] + [(lang, str(i), f"{lang} line {i}") for lang in ("en", "de") for i in (2, 1, 3)]
    path = tmp_path / "c.tsv"
    path.write_text("\n".join("\t".join(r) for r in rows) + "\n")
    corpus = read_corpus(path)
    assert corpus.lines["en"] == ["en line 1", "en line 2", "en line 3"]
    path.write_text("\n".join("\t".join(r) for r in rows[:-1]) + "\n")
    with pytest.raises(polytok.CorpusError, match="same line ids"):
        read_corpus(path)
    assert read_corpus(path, truncate=True).n_lines == 2


def test_archives(tmp_path, trained):
    archive = tmp_path / "c.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for language in ("en", "de"):
            tar.add(CORPORA / f"{language}.txt", arcname=f"corpus/{language}.txt")
    assert read_corpus(archive).lines["de"] == (CORPORA / "de.txt").read_text("utf-8").splitlines()


# ------------------------------------------------------------------ FLORES


def test_flores_every_language_three_tokenizers(flores, cl100k, trained, tmp_path):
    spm = pytest.importorskip("sentencepiece")
    prefix = tmp_path / "uni"
    spm.SentencePieceTrainer.train(
        input=",".join(str(p) for p in sorted(CORPORA.glob("*.txt"))), model_prefix=str(prefix),
        model_type="unigram", vocab_size=4000, normalization_rule_name="identity", minloglevel=2,
    )
    report = polytok.report(FLORES, [cl100k, trained, f"{prefix}.model"], progress=False)
    assert report.metadata["languages"] == len(flores) >= 200 and report.pivot == "eng_Latn"
    assert len(report.rows) == 3 * len(flores)
    assert report.row("mya_Mymr", report.tokenizers[0])["premium"] > 5  # Burmese in cl100k
    assert report.row("mya_Mymr")["spaceless"] and not report.row("fra_Latn")["spaceless"]
    # A model trained on 12 languages cannot read most scripts: flagged, not cheap.
    unigram = report.summary[2]
    assert unigram["excluded_languages"] and "eng_Latn" not in unigram["excluded_languages"]


# ------------------------------------------------------- the HTML in a browser


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    pytest.skip("no headless browser: install Debian's chromium (apt-get install chromium)")


class Browser:
    """Headless chromium driven over the DevTools protocol: a page, and
    every network request that page makes (the browser's own background
    traffic is not the page's and is not seen here)."""

    def __init__(self, executable: str, profile: Path):
        websocket = pytest.importorskip("websocket", reason="websocket-client drives the browser")
        self.process = subprocess.Popen(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             "--remote-debugging-port=0", "--remote-allow-origins=*", f"--user-data-dir={profile}",
             "--window-size=1200,1600", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        for line in self.process.stderr:
            if "DevTools listening on" in line:
                port = line.split("127.0.0.1:")[1].split("/")[0]
                break
        else:
            raise RuntimeError("chromium did not start its DevTools server")
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30).read())
        page = next(t for t in targets if t["type"] == "page")
        self.socket = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60)
        self.next_id, self.events = 0, []

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return message["result"]
            self.events.append(message)

    def wait_for(self, event: str) -> None:
        while not any(e.get("method") == event for e in self.events):
            self.events.append(json.loads(self.socket.recv()))

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"]["value"]

    def close(self) -> None:
        self.socket.close()
        self.process.kill()
        self.process.wait()


def test_html_page_in_a_headless_browser(small, trained, cl100k, tmp_path):
    """The page renders in a real browser, its charts are drawn (a
    screenshot of each chart holds matplotlib's colours), and the page
    requests nothing but itself."""
    executable = chromium()
    plt_image = pytest.importorskip("matplotlib.image")
    report = polytok.report(small, [("trained", trained), ("cl100k", cl100k)], progress=False)
    page = tmp_path / "report.html"
    report.save(page)
    html = page.read_text()
    # Nothing to run or fetch: no script, and links only within the page.
    assert "<script" not in html and not re.search(r'(?:src|href)="(?!#)', html)

    browser = Browser(executable, tmp_path / "profile")
    try:
        browser.call("Network.enable")
        browser.call("Page.enable")
        browser.call("Page.navigate", url=page.as_uri())
        browser.wait_for("Page.loadEventFired")
        charts = browser.evaluate(
            "[...document.querySelectorAll('figure.chart')].map(f => {"
            " const r = f.getBoundingClientRect();"
            " return {id: f.id, x: r.x, y: r.y + window.scrollY, width: r.width, height: r.height}; })"
        )
        rows = browser.evaluate("document.querySelectorAll('#rows tbody tr').length")
        shots = {}
        for chart in charts:
            clip = {key: chart[key] for key in ("x", "y", "width", "height")} | {"scale": 1}
            data = browser.call("Page.captureScreenshot", clip=clip, captureBeyondViewport=True)["data"]
            shots[chart["id"]] = plt_image.imread(io.BytesIO(base64.b64decode(data)), format="png")
        requests = [e["params"]["request"]["url"] for e in browser.events if e.get("method") == "Network.requestWillBeSent"]
    finally:
        browser.close()
    assert rows == len(report.rows)
    assert [c["id"] for c in charts] == ["chart-premium", "chart-cost", "chart-scripts", "chart-lorenz"]
    assert all(c["width"] > 300 and c["height"] > 200 for c in charts), charts
    for name, image in shots.items():
        pixels = (image[..., :3] * 255).astype(int)
        # matplotlib's first colour (tab:blue) draws the first tokenizer.
        blue = (abs(pixels - [31, 119, 180]).sum(axis=-1) < 40).sum()
        assert blue > 100, (name, blue)
        assert (pixels.sum(axis=-1) < 600).mean() > 0.005, name  # ink, not a blank box
    assert requests == [page.as_uri()], requests
