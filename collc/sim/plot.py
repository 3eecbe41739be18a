"""busbw-against-size figures, as the papers draw them (log-2 x axis), written atomically.

``compare``/``simulate`` plots (:func:`collc.tuning.plot_busbw`) and the ``bench report``
plot share the figure's frame and its writing here; matplotlib is imported only when
a plot is drawn (it is the slowest import of the CLI).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from collc.inputs import plot_file
from collc.outputs import write_file


def busbw_figure() -> tuple[Any, Any]:
    """A new (figure, axes) pair on the non-interactive backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(7.5, 4.5), dpi=120)


def save_busbw_figure(fig: Any, ax: Any, title: str, path: str | Path, legend_size: int = 8,
                      title_size: int | None = None) -> None:
    """Label the axes, then write the figure to ``path`` (.png, .pdf or .svg) atomically."""
    import matplotlib.pyplot as plt

    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(title, fontsize=title_size)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=legend_size)
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, format=plot_file(path).suffix.lower().lstrip("."))
    plt.close(fig)
    write_file(path, image.getvalue())
