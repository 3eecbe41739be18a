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


def size_label(size: float) -> str:
    """A tick label in B, KiB, MiB, GiB (``4KiB``, ``1.5MiB``).

    >>> [size_label(x) for x in (512, 4096, 1.5 * 2**20, 2**30, 2**42)]
    ['512B', '4KiB', '1.5MiB', '1GiB', '4096GiB']
    """
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            value = size / (1 << shift)
            return f"{value:.3g}{unit}" if value < 1000 else f"{value:.0f}{unit}"
    return f"{size:.3g}B"


def busbw_figure() -> tuple[Any, Any]:
    """A new (figure, axes) pair on the non-interactive backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(7.5, 4.5), dpi=120)


def style_busbw_axes(fig: Any, ax: Any, title: str, legend_size: int = 8, title_size: int | None = None,
                     legend_outside: bool = False) -> None:
    """Log-2 size axis labelled in B/KiB/MiB/GiB, busbw axis, title, grid and legend."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=2, numticks=12))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: size_label(x)))
    ax.set_xlabel("message size")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(title, fontsize=title_size)
    ax.grid(True, which="both", alpha=0.3)
    if legend_outside:      # many series: beside the axes, where it hides no curve
        fig.set_size_inches(10, 4.5)
        ax.legend(fontsize=legend_size, loc="center left", bbox_to_anchor=(1.01, 0.5))
    else:
        ax.legend(fontsize=legend_size)
    fig.tight_layout()


def save_busbw_figure(fig: Any, ax: Any, title: str, path: str | Path, legend_size: int = 8,
                      title_size: int | None = None, legend_outside: bool = False) -> None:
    """:func:`style_busbw_axes`, then :func:`write_figure`."""
    style_busbw_axes(fig, ax, title, legend_size, title_size, legend_outside)
    write_figure(fig, path)


def write_figure(fig: Any, path: str | Path) -> None:
    """Write the figure to ``path`` (.png, .pdf or .svg) atomically and close it."""
    import matplotlib.pyplot as plt

    image = io.BytesIO()
    fig.savefig(image, format=plot_file(path).suffix.lower().lstrip("."))
    plt.close(fig)
    write_file(path, image.getvalue())
