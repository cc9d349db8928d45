"""A plotly figure in the page that redraws in place: a ``gr.HTML`` whose value is the figure's
JSON and whose script calls ``Plotly.react`` on the same element at every new value.

Gradio 6's ``gr.Plot`` remounts its plot whenever its value changes (a fresh ``newPlot``: about
50–100 ms a figure in a software-rendered browser, and the user's zoom is lost), so scrubbing
six views through it misses the 200 ms a slider step may take and ``uirevision`` cannot keep a
zoom. Here the template never changes (Gradio leaves the DOM alone), the value's watcher redraws
with ``Plotly.react`` (a diff), and ``uirevision`` in the layouts keeps zoom and pan across
tokens. plotly.js is the copy the ``plotly`` package ships, served by the app.
"""

from __future__ import annotations

from pathlib import Path

import gradio as gr
import plotly

PLOTLY_JS = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


def static_paths() -> list[Path]:
    """What the app must serve (``gr.set_static_paths``) for the panels' script."""
    return [PLOTLY_JS]


def _head() -> str:
    return f'<script src="/gradio_api/file={PLOTLY_JS.as_posix()}"></script>'


JS = """
const div = element.querySelector('.qg-plotly');
const config = {responsive: true, displaylogo: false,
                modeBarButtonsToRemove: ['select2d', 'lasso2d']};
let drawn = false;
const draw = () => {
  if (!props.value) return;
  const fig = JSON.parse(props.value);
  if (drawn) {
    Plotly.react(div, fig.data, fig.layout, config);
  } else {
    Plotly.newPlot(div, fig.data, fig.layout, config);
    drawn = true;
  }
};
draw();
watch('value', draw);
"""


def plot_panel(value: str, elem_id: str, label: str) -> gr.HTML:
    """The panel (inside a gr.Blocks context) showing the figure JSON `value`."""
    return gr.HTML(value, label=label, show_label=False, elem_id=elem_id,
                   html_template="<div class='qg-plotly' style='width: 100%'></div>",
                   js_on_load=JS, head=_head(), padding=False, container=True)
