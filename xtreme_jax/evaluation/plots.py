"""The plots of the reports (matplotlib on an Agg canvas, no pyplot state; PNG written atomically): bars per
language grouped by language family, training-loss lines, and the styles that tell many series apart."""

from __future__ import annotations

import io
import math
from typing import Mapping, Sequence

from xtreme_jax import atomic

# Language family of every XTREME language (plus a few of XTREME-R / XGLUE).
# Indo-European languages carry their branch; languages not listed plot as
# "Other".
LANGUAGE_FAMILY = {
    "af": "IE: Germanic", "de": "IE: Germanic", "en": "IE: Germanic", "nl": "IE: Germanic",
    "es": "IE: Romance", "fr": "IE: Romance", "it": "IE: Romance", "pt": "IE: Romance",
    "ro": "IE: Romance",
    "bg": "IE: Slavic", "ru": "IE: Slavic", "pl": "IE: Slavic", "uk": "IE: Slavic",
    "lt": "IE: Baltic",
    "el": "IE: Greek",
    "bn": "IE: Indo-Aryan", "hi": "IE: Indo-Aryan", "mr": "IE: Indo-Aryan", "ur": "IE: Indo-Aryan",
    "gu": "IE: Indo-Aryan", "pa": "IE: Indo-Aryan",
    "fa": "IE: Iranian",
    "ar": "Afro-Asiatic", "he": "Afro-Asiatic",
    "sw": "Niger-Congo", "yo": "Niger-Congo", "wo": "Niger-Congo",
    "zh": "Sino-Tibetan", "my": "Sino-Tibetan",
    "ja": "Japonic",
    "ko": "Koreanic",
    "ml": "Dravidian", "ta": "Dravidian", "te": "Dravidian",
    "id": "Austronesian", "jv": "Austronesian", "ms": "Austronesian", "tl": "Austronesian",
    "kk": "Turkic", "tr": "Turkic", "az": "Turkic",
    "et": "Uralic", "fi": "Uralic", "hu": "Uralic",
    "th": "Kra-Dai",
    "vi": "Austroasiatic",
    "ka": "Kartvelian",
    "eu": "Basque",
    "qu": "Quechuan",
    "ht": "Creole",
}
OTHER_FAMILY = "Other"
# Order of the family groups in plots (and their colours).
FAMILY_ORDER = (
    "IE: Germanic", "IE: Romance", "IE: Slavic", "IE: Baltic", "IE: Greek", "IE: Indo-Aryan",
    "IE: Iranian", "Afro-Asiatic", "Niger-Congo", "Sino-Tibetan", "Japonic", "Koreanic",
    "Dravidian", "Austronesian", "Turkic", "Uralic", "Kra-Dai", "Austroasiatic", "Kartvelian",
    "Basque", "Quechuan", "Creole", OTHER_FAMILY,
)

# Line styles that, with tab10's ten colours, tell up to 40 series apart (`series_styles`).
LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D")


def language_family(lang: str) -> str:
  """The family of `lang` (`LANGUAGE_FAMILY`; \"Other\" when unlisted)."""
  return LANGUAGE_FAMILY.get(lang, OTHER_FAMILY)


def new_figure(width: float, height: float = 4.2):
  """A matplotlib `Figure` on an Agg canvas (no pyplot state); `save_png` writes it."""
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure

  fig = Figure(figsize=(width, height), dpi=100)
  FigureCanvasAgg(fig)
  return fig


def series_styles(n: int) -> list[tuple]:
  """(colour, line style, marker) of `n` series: tab10's colours, then again with the next line style and
  marker, so that no two of up to 40 series look alike."""
  from matplotlib import colormaps
  colours = colormaps["tab10"].colors
  return [(colours[i % len(colours)], LINE_STYLES[i // len(colours) % len(LINE_STYLES)],
           MARKERS[i // len(colours) % len(MARKERS)]) for i in range(n)]


def save_png(fig, out_png: str) -> str:
  """`fig` as PNG at `out_png`, atomically; returns the path."""
  png = io.BytesIO()
  fig.savefig(png, format="png", bbox_inches="tight")
  atomic.write_bytes(out_png, png.getvalue())
  return out_png


def histories(runs: Mapping[str, Mapping]) -> dict[str, list]:
  """{model: [(step, loss), ...]} of the runs (a report's results["runs"]) that have a loss history."""
  return {name: [(float(s), float(l)) for s, l in run["history"]]
          for name, run in runs.items() if run.get("history")}


def loss_figure(runs: Mapping[str, Mapping]):
  """The `plot_losses` figure: one line per model, each its own (colour, line style) (`series_styles`)."""
  by_model = histories(runs)
  if not by_model:
    raise ValueError("no model has a loss history")
  fig = new_figure(7.0)
  ax = fig.add_subplot(1, 1, 1)
  for (name, history), (colour, style, _) in zip(by_model.items(), series_styles(len(by_model))):
    steps, losses = zip(*history)
    ax.plot(steps, losses, color=colour, linestyle=style, linewidth=1.2, label=name)
    selected = runs[name].get("selected_step")
    if selected is not None and float(selected) in steps:
      ax.plot([selected], [losses[steps.index(float(selected))]], "o", color=colour, markersize=4)
  ax.set_xlabel("step")
  ax.set_ylabel("training loss")
  ax.set_title("Fine-tuning loss (dot: selected step)")
  ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
  ax.spines["top"].set_visible(False)
  ax.spines["right"].set_visible(False)
  return fig


def plot_losses(runs: Mapping[str, Mapping], out_png: str) -> str:
  """Training loss against step, one line per model (a dot at the selected step); written atomically."""
  return save_png(loss_figure(runs), out_png)


def language_bars(title: str, label: str, scores: Mapping[str, float], order: Sequence[str], english: str = "en"):
  """Bars of `scores` (language -> score on 0-100) in `order`, grouped and coloured by language family (a
  matplotlib `Figure`, Agg canvas): `english` hatched and annotated, a dashed line at the mean of the others, a
  score of exactly 0 marked on the axis and labelled "0.0", every family in the legend."""
  from matplotlib.patches import Patch
  from matplotlib import colormaps

  rank = {family: i for i, family in enumerate(FAMILY_ORDER)}
  order = sorted(order, key=lambda lg: rank[language_family(lg)])  # stable: within a family, the given order.
  values = [scores[lg] for lg in order]
  finite = [v for v in values if math.isfinite(v)]
  top = max([100.0] + finite) * 1.1
  families = [language_family(lg) for lg in order]
  # tab20 without its two greys (grey is "Other"), then tab20b: a fixed colour per family.
  palette = [c for i, c in enumerate(colormaps["tab20"].colors) if i not in (14, 15)] + list(colormaps["tab20b"].colors)
  colour = {f: ((0.6, 0.6, 0.6) if f == OTHER_FAMILY else palette[rank[f] % len(palette)]) for f in families}

  fig = new_figure(max(6.0, 0.32 * len(order) + 3.5))
  ax = fig.add_subplot(1, 1, 1)
  xs = list(range(len(order)))
  bars = ax.bar(xs, values, color=[colour[f] for f in families], edgecolor="black", linewidth=0.4)
  for x, v in zip(xs, values):  # A zero has zero height: a thick mark on the axis in its colour, labelled "0.0".
    if v == 0:
      ax.plot([x - 0.4, x + 0.4], [0, 0], color=colour[families[x]], linewidth=3, solid_capstyle="butt",
              clip_on=False, zorder=3)
      if order[x] != english:
        ax.annotate("0.0", (x, 0), xytext=(0, 3), textcoords="offset points", ha="center", va="bottom", fontsize=7)
  for x in range(1, len(order)):  # Thin separators between family groups.
    if families[x] != families[x - 1]:
      ax.axvline(x - 0.5, color="0.85", linewidth=0.8, zorder=0)
  ax.set_ylim(min([0.0] + finite), top)
  ax.set_xticks(xs)
  ax.set_xticklabels(order, fontsize=8)
  ax.set_xlim(-0.6, len(order) - 0.4)
  handles = [Patch(facecolor=colour[f], edgecolor="black", linewidth=0.4, label=f)
             for f in dict.fromkeys(families)]
  if english in scores:
    i = order.index(english)
    bars[i].set_hatch("//")
    bars[i].set_linewidth(1.2)
    ax.get_xticklabels()[i].set_fontweight("bold")
    ax.annotate(f"{scores[english]:.1f}", (i, bars[i].get_height()), xytext=(0, 2), textcoords="offset points",
                ha="center", va="bottom", fontsize=7, fontweight="bold")
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="English (source)"))
  others = [v for lg, v in scores.items() if lg != english and math.isfinite(v)]
  if others:
    mean = sum(others) / len(others)
    handles.append(ax.axhline(mean, color="black", linestyle="--", linewidth=1.0,
                              label=f"non-en mean {mean:.1f}"))
  ax.set_ylabel(f"{label} (%)")
  ax.set_xlabel("language (grouped by family)")
  ax.set_title(title)
  # Every handle in one column beside the axes; the figure grows so that none is cut off.
  fig.set_figheight(max(4.2, 0.6 + 0.17 * len(handles)))
  ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
  ax.spines["top"].set_visible(False)
  ax.spines["right"].set_visible(False)
  return fig


