"""How a token-efficiency report (``polytok.report``) is shown: terminal
tables (rich), Markdown, CSV and a self-contained HTML page whose charts
are drawn by matplotlib as inline SVG (glyphs as paths: the page requests
nothing, not even a font)."""

from __future__ import annotations

import csv
import html as html_escape
import io
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from polytok.report import Report

#: The columns of the full table, in order: (row key, heading, format).
COLUMNS = (
    ("language", "Language", "{}"),
    ("tokenizer", "Tokenizer", "{}"),
    ("script", "Script", "{}"),
    ("premium", "Premium", "{:.3f}"),
    ("premium_low", "CI low", "{:.3f}"),
    ("premium_high", "CI high", "{:.3f}"),
    ("tokens", "Tokens", "{:,}"),
    ("characters", "Characters", "{:,}"),
    ("bytes", "Bytes", "{:,}"),
    ("words", "Words", "{:,}"),
    ("tokens_per_character", "Tokens/char", "{:.3f}"),
    ("bytes_per_token", "Bytes/token", "{:.2f}"),
    ("fertility", "Fertility", "{:.2f}"),
    ("continued_words", "Continued words", "{:.1%}"),
    ("unknown_rate", "Unknown", "{:.2%}"),
    ("byte_fallback_rate", "Byte fallback", "{:.2%}"),
    ("context_characters", "Chars in context", "{:,.0f}"),
    ("context_lines", "Lines in context", "{:,.1f}"),
    ("vocabulary_used", "Vocabulary used", "{:.1%}"),
    ("script_vocabulary_share", "Vocabulary in its script", "{:.1%}"),
)

#: The summary's rows: (summary key, heading, format).
SUMMARY = (
    ("vocab_size", "Vocabulary", "{:,}"),
    ("total_tokens", "Total tokens", "{:,}"),
    ("languages", "Languages counted", "{}"),
    ("mean_premium", "Mean premium", "{:.2f}"),
    ("max_premium", "Max premium", "{:.2f}"),
    ("max_premium_language", "  for", "{}"),
    ("cost_ratio", "Max/min cost", "{:.2f}"),
    ("gini", "Gini of cost", "{:.3f}"),
    ("renyi_efficiency", "Rényi efficiency", "{:.3f}"),
    ("above_1_5", "Premium > 1.5", "{}"),
    ("above_2", "Premium > 2", "{}"),
    ("excluded_languages", "Excluded (>10% unknown)", "{}"),
)


def _cell(value, fmt: str) -> str:
    if value is None:
        return "–"
    if isinstance(value, list):
        # Language lists: their length, and the names when few.
        return f"{len(value)}: {', '.join(value)}" if 0 < len(value) <= 3 else str(len(value))
    if isinstance(value, bool):
        return "yes" if value else ""
    return fmt.format(value)


def _sorted_languages(report: Report) -> list[str]:
    """Languages by the first tokenizer's premium, dearest first."""
    first = report.tokenizers[0]
    rows = [r for r in report.rows if r["tokenizer"] == first]
    return [r["language"] for r in sorted(rows, key=lambda r: -(r["premium"] or 0.0))]


def _by_key(report: Report) -> dict[tuple[str, str], dict]:
    return {(r["language"], r["tokenizer"]): r for r in report.rows}


def _premium_text(row: dict) -> str:
    if row["premium"] is None:
        return "–"
    text = f"{row['premium']:.2f}"
    if row["premium_low"] is not None:
        text += f" ({row['premium_low']:.2f}–{row['premium_high']:.2f})"
    if row["flagged_unknown"]:
        text += "!"
    return text


def renderables(report: Report) -> list:
    """The report as rich renderables: the premium table, the summary and
    the notes."""
    meta = report.metadata
    rows = _by_key(report)
    heading = Text.assemble(
        ("Token premium", "bold"),
        f" over {meta['languages']} languages × {meta['lines_per_language']} aligned lines, "
        f"relative to {report.pivot} (= 1.00); {int(meta['confidence'] * 100)}% bootstrap intervals",
    )
    premiums = Table(show_edge=False, pad_edge=False, header_style="bold")
    premiums.add_column("Language", no_wrap=True)
    premiums.add_column("Script", no_wrap=True)
    for name in report.tokenizers:
        premiums.add_column(name, justify="right", overflow="fold")
    for language in _sorted_languages(report):
        first = rows[(language, report.tokenizers[0])]
        label = Text(language, style="bold" if language == report.pivot else "")
        premiums.add_row(label, first["script"], *(_premium_text(rows[(language, t)]) for t in report.tokenizers))

    summary = Table(title="Per tokenizer", show_edge=False, pad_edge=False, header_style="bold")
    summary.add_column("", no_wrap=True)
    for name in report.tokenizers:
        summary.add_column(name, justify="right", overflow="fold")
    for key, title, fmt in SUMMARY:
        summary.add_row(title, *(_cell(s[key], fmt) for s in report.summary))

    notes = []
    spaceless = sorted({r["language"] for r in report.rows if r["spaceless"]})
    if spaceless:
        notes.append(
            f"Written without spaces (no fertility or continued words): {', '.join(spaceless)}."
        )
    if any(r["flagged_unknown"] for r in report.rows):
        notes.append("! more than 10% unknown tokens: left out of the summary statistics.")
    if len(report.summary) > 1:
        fairest = next(s for s in report.summary if s["tokenizer"] == report.fairest)
        notes.append(
            f"Fairest: {fairest['tokenizer']} (Gini {fairest['gini']:.3f}, {fairest['total_tokens']:,} tokens in all)."
        )
    context = meta["context"]
    cheapest = min(
        (r for r in report.rows if r["tokenizer"] == report.tokenizers[0] and r["context_characters"]),
        key=lambda r: -r["context_characters"],
        default=None,
    )
    dearest = min(
        (r for r in report.rows if r["tokenizer"] == report.tokenizers[0] and r["context_characters"]),
        key=lambda r: r["context_characters"],
        default=None,
    )
    if cheapest and dearest:
        notes.append(
            f"A {context:,}-token context holds {cheapest['context_characters']:,.0f} characters of "
            f"{cheapest['language']} but {dearest['context_characters']:,.0f} of {dearest['language']} "
            f"with {report.tokenizers[0]}."
        )
    return [heading, premiums, Text(""), summary, Text(""), *(Text(n) for n in notes)]


def table_text(report: Report, width: int | None) -> str:
    """The terminal tables as plain text, ``width`` columns wide."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width or 100, color_system=None, force_terminal=False)
    console.print(Group(*renderables(report)))
    return buffer.getvalue()


def markdown(report: Report) -> str:
    meta = report.metadata
    out = [
        "# Token-efficiency report",
        "",
        f"{meta['languages']} languages × {meta['lines_per_language']} aligned lines of `{meta['corpus']}`, "
        f"premiums relative to `{report.pivot}`, {int(meta['confidence'] * 100)}% bootstrap intervals "
        f"({meta['bootstrap']} resamples); polytok {meta['polytok_version']}.",
        "",
        "## Per tokenizer",
        "",
        "| | " + " | ".join(report.tokenizers) + " |",
        "|---|" + "---:|" * len(report.tokenizers),
    ]
    for key, title, fmt in SUMMARY:
        values = []
        for s in report.summary:
            value = s[key]
            values.append(", ".join(value) if isinstance(value, list) and value else _cell(value, fmt))
        out.append(f"| {title.strip()} | " + " | ".join(values) + " |")
    out += ["", "## Per language", "", "| " + " | ".join(c[1] for c in COLUMNS) + " |"]
    out.append("|" + "|".join("---" if i < 3 else "---:" for i in range(len(COLUMNS))) + "|")
    order = {language: i for i, language in enumerate(_sorted_languages(report))}
    for row in sorted(report.rows, key=lambda r: (report.tokenizers.index(r["tokenizer"]), order[r["language"]])):
        out.append("| " + " | ".join(_cell(row[key], fmt) for key, _, fmt in COLUMNS) + " |")
    return "\n".join(out) + "\n"


def csv_text(report: Report) -> str:
    buffer = io.StringIO()
    keys = list(report.rows[0]) if report.rows else []
    writer = csv.DictWriter(buffer, fieldnames=keys, lineterminator="\n")
    writer.writeheader()
    writer.writerows(report.rows)
    return buffer.getvalue()


# --------------------------------------------------------------------- html


def _figure(width: float, height: float):
    """A matplotlib figure (no pyplot: no global state, no GUI backend)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ImportError("the HTML report draws its charts with matplotlib: pip install 'polytok[plot]'") from e
    figure = Figure(figsize=(width, height), layout="constrained")
    return figure, figure.add_subplot()


def _svg(figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    # Inline, without the XML prologue and the RDF metadata block.
    text = text[text.index("<svg") :]
    if "<metadata>" in text:
        text = text[: text.index("<metadata>")] + text[text.index("</metadata>") + len("</metadata>") :]
    return text


def _premium_chart(report: Report) -> str:
    rows = _by_key(report)
    languages = _sorted_languages(report)[::-1]  # dearest at the top
    fig, ax = _figure(8, max(3.0, 0.16 * len(languages) + 1.2))
    n = len(report.tokenizers)
    for k, name in enumerate(report.tokenizers):
        ys = [i + (k - (n - 1) / 2) * 0.8 / max(n, 1) for i in range(len(languages))]
        xs = [rows[(lang, name)]["premium"] or 0.0 for lang in languages]
        low = [max(0.0, x - (rows[(lang, name)]["premium_low"] or x)) for x, lang in zip(xs, languages)]
        high = [max(0.0, (rows[(lang, name)]["premium_high"] or x) - x) for x, lang in zip(xs, languages)]
        ax.errorbar(xs, ys, xerr=[low, high], fmt="o", markersize=3, capsize=1.5, elinewidth=0.8, label=name)
    ax.axvline(1.0, color="0.4", linewidth=0.8, linestyle="--")
    ax.set_yticks(range(len(languages)))
    labels = ax.set_yticklabels(
        [f"{lang} (pivot)" if lang == report.pivot else lang for lang in languages], fontsize=7
    )
    labels[languages.index(report.pivot)].set_fontweight("bold")
    ax.set_ylim(-1, len(languages))
    ax.set_xlabel(f"tokens relative to {report.pivot} for the same lines (premium)")
    ax.grid(axis="x", linewidth=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("Premium per language (dearest first)")
    return _svg(fig)


def _cost_chart(report: Report) -> str:
    fig, ax = _figure(7, 4.5)
    for name in report.tokenizers:
        rows = [r for r in report.rows if r["tokenizer"] == name]
        ax.scatter(
            [r["bytes"] / r["lines"] for r in rows], [r["tokens"] / r["lines"] for r in rows], s=12, label=name
        )
    ax.set_xlabel("UTF-8 bytes per line")
    ax.set_ylabel("tokens per line")
    ax.set_title("Token cost against bytes (one point per language)")
    ax.grid(linewidth=0.3)
    ax.legend(fontsize=8)
    return _svg(fig)


def _script_chart(report: Report) -> str:
    totals: dict[str, float] = {}
    for shares in report.scripts.values():
        for script, share in shares.items():
            totals[script] = totals.get(script, 0.0) + share
    top = [s for s, _ in sorted(totals.items(), key=lambda kv: -kv[1])[:9]]
    fig, ax = _figure(7, 0.6 * len(report.tokenizers) + 2.0)
    left = [0.0] * len(report.tokenizers)
    for script in top + ["other"]:
        widths = []
        for name in report.tokenizers:
            shares = report.scripts[name]
            widths.append(
                sum(v for s, v in shares.items() if s not in top) if script == "other" else shares.get(script, 0.0)
            )
        ax.barh(report.tokenizers, widths, left=left, label=script)
        left = [a + b for a, b in zip(left, widths)]
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the vocabulary")
    ax.set_title("Vocabulary by Unicode script")
    fig.legend(fontsize=7, ncol=5, loc="outside lower center")
    return _svg(fig)


def _lorenz_chart(report: Report) -> str:
    fig, ax = _figure(4.5, 4.5)
    ax.plot([0, 1], [0, 1], color="0.5", linewidth=0.8, linestyle="--", label="equal cost")
    for s in report.summary:
        points = report.lorenz[s["tokenizer"]]
        ax.plot([p[0] for p in points], [p[1] for p in points], label=f"{s['tokenizer']} (Gini {s['gini']:.3f})")
    ax.set_xlabel("share of languages, cheapest first")
    ax.set_ylabel("share of the token cost")
    ax.set_title("Lorenz curves of token cost")
    ax.legend(fontsize=7)
    return _svg(fig)


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; font-size: 0.8em; margin: 1em 0; }
th, td { padding: 0.2em 0.6em; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child, td.text { text-align: left; }
tr.pivot td { font-weight: bold; }
tr.flagged td { color: #a00; }
figure { margin: 1.5em 0; }
figure svg { max-width: 100%; height: auto; }
.meta { color: #555; font-size: 0.85em; }
"""


def html(report: Report) -> str:
    """A self-contained page: charts as inline SVG, tables, and what was
    measured. No script, no stylesheet or font to fetch."""
    e = html_escape.escape
    meta = report.metadata
    charts = [
        ("premium", _premium_chart(report)),
        ("cost", _cost_chart(report)),
        ("scripts", _script_chart(report)),
        ("lorenz", _lorenz_chart(report)),
    ]
    summary_rows = "".join(
        f"<tr><td>{e(title.strip())}</td>"
        + "".join(
            f"<td>{e(', '.join(s[key]) if isinstance(s[key], list) and s[key] else _cell(s[key], fmt))}</td>"
            for s in report.summary
        )
        + "</tr>"
        for key, title, fmt in SUMMARY
    )
    order = {language: i for i, language in enumerate(_sorted_languages(report))}
    body_rows = []
    for row in sorted(report.rows, key=lambda r: (report.tokenizers.index(r["tokenizer"]), order[r["language"]])):
        classes = " ".join(
            c for c, on in (("pivot", row["language"] == report.pivot), ("flagged", row["flagged_unknown"])) if on
        )
        cells = "".join(
            ("<td class=text>" if i < 3 else "<td>") + e(_cell(row[key], fmt)) + "</td>"
            for i, (key, _, fmt) in enumerate(COLUMNS)
        )
        body_rows.append(f"<tr class=\"{classes}\">{cells}</tr>")
    tokenizers = "".join(
        f"<li>{e(t['name'])}: {e(t['source'])}, {t['vocab_size']:,} tokens"
        + (f", SHA-256 <code>{t['sha256'][:16]}…</code>" if t["sha256"] else "")
        + "</li>"
        for t in meta["tokenizers"]
    )
    figures = "".join(f'<figure id="chart-{name}" class="chart">{svg}</figure>' for name, svg in charts)
    fairest = (
        f"<p>Fairest: <b>{e(report.fairest)}</b> (lowest Gini coefficient of token cost).</p>"
        if len(report.summary) > 1
        else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Token-efficiency report</title>
<style>{_STYLE}</style></head>
<body>
<h1>Token-efficiency report</h1>
<p>What the same text costs in tokens in {meta['languages']} languages ({meta['lines_per_language']} aligned lines
each), relative to <b>{e(report.pivot)}</b>; intervals are {int(meta['confidence'] * 100)}% bootstrap intervals over lines.</p>
{fairest}
<h2>Per tokenizer</h2>
<table id="summary"><thead><tr><th></th>{''.join(f'<th>{e(t)}</th>' for t in report.tokenizers)}</tr></thead>
<tbody>{summary_rows}</tbody></table>
{figures}
<h2>Per language</h2>
<table id="rows"><thead><tr>{''.join(f'<th>{e(c[1])}</th>' for c in COLUMNS)}</tr></thead>
<tbody>{''.join(body_rows)}</tbody></table>
<h2>What was measured</h2>
<ul class="meta"><li>Corpus: {e(meta['corpus'])} ({meta['languages']} languages, SHA-256 of each file in the JSON report)</li>
{tokenizers}<li>Context for the "in context" columns: {meta['context']:,} tokens; {meta['bootstrap']} bootstrap resamples, seed {meta['seed']}</li>
<li>polytok {e(meta['polytok_version'])}</li></ul>
</body></html>
"""
