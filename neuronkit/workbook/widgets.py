"""ipywidgets for people in JupyterLab: live filters, a command picker, a side-by-side stage view.

Each is an extra after a static rendering the caller displays first (widget state is not rendered
outside a live kernel), and none uses `ipywidgets.Output`: see `_html_pane`.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from neuronkit.pipeline.config import default_run_dir
from neuronkit.pipeline.record import RunDir
from neuronkit.run_command import run_command
from neuronkit.workbook.params import DTYPES, Params


def filter_widget(frame: Any, by: list[str], text_column: str | None = None) -> Any:
    """Dropdowns over `by` columns (and a substring box over `text_column`) that filter `frame` live.

    Callers display `frame` itself first: the widget state is not rendered outside a live kernel. The
    filtered table is an HTML widget, not an `Output` widget: see `_html_pane`.
    """
    import ipywidgets as widgets

    controls: dict[str, Any] = {
        column: widgets.Dropdown(options=["(all)"] + sorted(map(str, frame[column].unique())), description=column)
        for column in by if column in frame.columns}
    if text_column and text_column in frame.columns:
        controls[text_column] = widgets.Text(description=text_column, placeholder="substring")
    output = widgets.HTML()

    def refresh(_: Any = None) -> None:
        shown = frame
        for column, control in controls.items():
            value = control.value
            if column == text_column and value:
                shown = shown[shown[column].astype(str).str.contains(value, regex=False)]
            elif column != text_column and value != "(all)":
                shown = shown[shown[column].astype(str) == value]
        output.value = _html_pane(shown)

    for control in controls.values():
        control.observe(refresh, names="value")
    refresh()
    return widgets.VBox([widgets.HBox(list(controls.values())), output])


def notebook_command(model: str, dtype: str, seq_len: int, batch_size: int) -> str:
    """The `neuronkit run` command for these parameters, run from the repository root."""
    return run_command(model, str(default_run_dir(model)),
                       {"dtype": dtype, "seq_len": seq_len, "batch_size": batch_size})


def command_picker(params: Params) -> Any:
    """Print the command for `params`, and return a model/dtype picker that rebuilds it (JupyterLab)."""
    import ipywidgets as widgets

    from neuronkit.models import BUNDLED_MODELS

    config = params.config
    print(notebook_command(params.model, config.dtype, config.seq_len, config.batch_size))
    model = widgets.Combobox(value=params.model, options=list(BUNDLED_MODELS), ensure_option=False,
                             description="model", placeholder="bundled name or checkpoint directory")
    dtype = widgets.Dropdown(options=list(DTYPES), value=config.dtype, description="dtype")
    shown = widgets.HTML()

    def refresh(_: Any = None) -> None:
        command = notebook_command(model.value or params.model, dtype.value, config.seq_len, config.batch_size)
        cell = f"model = {model.value or params.model!r}\ndtype = {dtype.value!r}"
        shown.value = (f"<p>Terminal:</p><pre>{html.escape(command)}</pre>"
                       f"<p>Or in each notebook's parameters cell:</p><pre>{html.escape(cell)}</pre>")

    model.observe(refresh, names="value")
    dtype.observe(refresh, names="value")
    refresh()
    return widgets.VBox([widgets.HBox([model, dtype]), shown])


def compare_widget(run_dir: str | Path) -> Any:
    """Two stage pickers showing the chosen records side by side (JupyterLab)."""
    import ipywidgets as widgets

    from neuronkit.reporting.render import render_card

    run = RunDir(run_dir)
    stages = [stage for stage, record in run.results().items() if record is not None]
    panes = []
    for default in stages[1:2] + stages[-1:]:
        picker = widgets.Dropdown(options=stages, value=default, description="stage")
        output = widgets.HTML()

        def refresh(_: Any = None, picker: Any = picker, output: Any = output) -> None:
            output.value = render_card(run.read(picker.value))

        picker.observe(refresh, names="value")
        refresh()
        panes.append(widgets.VBox([picker, output], layout=widgets.Layout(width="50%")))
    return widgets.HBox(panes)


def _html_pane(shown: Any) -> str:
    """`shown`'s HTML for an `ipywidgets.HTML` pane.

    The widgets never use `ipywidgets.Output`: capturing output into one makes nbclient (papermill,
    nbval) send `comm_msg` updates on the kernel's shell socket from its IOPub handler while it is
    polling that socket for the cell's `execute_reply` (nbclient/output_widget.py `_publish_msg`). The
    zmq socket's edge-triggered wake-up is then lost, the reply sits unread and the cell "runs" until the
    cell timeout, forever without one: the stall seen at notebook 06's widget cell.
    """
    return shown._repr_html_()
