"""pyrun-mcp's matplotlib backend: `plt.show()` saves each open figure as a PNG into the run's
output folder (`PYRUN_OUTPUT_DIR`), where the server picks it up as an artifact, and closes it.

The server sets `MPLBACKEND=module://_pyrun_mpl_backend` and puts this module's folder first on
`PYTHONPATH`. Drawing is Agg's (no display needed); `savefig` works as usual.
"""

import os
import sys

from matplotlib import _pylab_helpers
from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg

FigureCanvas = FigureCanvasAgg
FigureManager = FigureManagerBase

_saved = 0


def _next_path(folder):
    """The next free `figure-N.png` in `folder`, made empty and ours (`x`: never overwrites)."""
    global _saved
    while True:
        _saved += 1
        path = os.path.join(folder, "figure-%d.png" % _saved)
        try:
            return open(path, "xb")
        except FileExistsError:
            continue


def show(*args, **kwargs):
    """Saves every open figure as `figure-N.png` in PYRUN_OUTPUT_DIR, then closes them."""
    folder = os.environ.get("PYRUN_OUTPUT_DIR")
    managers = _pylab_helpers.Gcf.get_all_fig_managers()
    if not folder or not os.path.isdir(folder):
        if managers:
            print("pyrun: no output folder; figures not saved", file=sys.stderr)
        _pylab_helpers.Gcf.destroy_all()
        return
    for manager in managers:
        with _next_path(folder) as file:
            manager.canvas.figure.savefig(file, format="png")
    _pylab_helpers.Gcf.destroy_all()


if not hasattr(FigureCanvasAgg, "new_manager"):  # matplotlib < 3.6

    def new_figure_manager(num, *args, FigureClass=None, **kwargs):
        from matplotlib.figure import Figure

        figure = (FigureClass or Figure)(*args, **kwargs)
        return new_figure_manager_given_figure(num, figure)

    def new_figure_manager_given_figure(num, figure):
        return FigureManager(FigureCanvas(figure), num)
