#!/bin/sh
# The python-data template's own step, run as root in the image after setup-rootfs.sh (both routes:
# images/build.sh's final layer and images/Dockerfile): matplotlib draws without a display by
# default, figures reach the workspace, and its font cache is built into the image.
#   - sandpit_matplotlib: the default backend (/etc/matplotlibrc): Agg, whose plt.show() saves
#     the open figures and which saves the figures left open at exit, as figure_<n>.png in the
#     workspace, where the template's outputs (*.png) return them. Figures saved with savefig are
#     not saved again.
#   - sandpit_mplconfig (imported by a .pth at start-up, cheaply): points MPLCONFIGDIR at a
#     writable folder under /tmp seeded with the font cache built here, so that no run spends a
#     second rebuilding it (a read-only config folder makes matplotlib build a fresh one each time).
set -eu

site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
mkdir -p "$site"
baked=/usr/local/share/sandpit/matplotlib

cat >"$site/sandpit_matplotlib.py" <<'PY'
"""sandpit's matplotlib backend: Agg, with plt.show() and exit saving the open figures (setup.sh)."""
import atexit
import os
import sys

from matplotlib import figure as _figure
from matplotlib._pylab_helpers import Gcf
from matplotlib.backend_bases import _Backend
from matplotlib.backends.backend_agg import _BackendAgg

_savefig = _figure.Figure.savefig


def _marked_savefig(self, *args, **kwargs):
    self._sandpit_saved = True
    return _savefig(self, *args, **kwargs)


_figure.Figure.savefig = _marked_savefig


def _folder():
    folder = os.environ.get("SANDPIT_FIGURES_DIR") or "/workspace"
    return folder if os.path.isdir(folder) and os.access(folder, os.W_OK) else os.getcwd()


def _free_name(folder, num):
    path = os.path.join(folder, "figure_%s.png" % num)
    n = 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(folder, "figure_%s_%d.png" % (num, n))
    return path


def save_open_figures():
    """Saves every open figure that is not saved yet as figure_<n>.png in the workspace."""
    for manager in Gcf.get_all_fig_managers():
        fig = manager.canvas.figure
        if getattr(fig, "_sandpit_saved", False):
            continue
        try:
            fig.savefig(_free_name(_folder(), manager.num))
        except Exception as e:  # a figure that cannot be drawn must not hide the others
            print("sandpit: figure %s was not saved: %s" % (manager.num, e), file=sys.stderr)


@_Backend.export
class _BackendSandpit(_BackendAgg):
    @classmethod
    def show(cls, *args, **kwargs):
        save_open_figures()


atexit.register(save_open_figures)
PY

cat >"$site/sandpit_mplconfig.py" <<PY
"""Seeds a writable matplotlib config folder with the font cache built into the image (setup.sh)."""
import os


def _seed(baked="$baked"):
    if "MPLCONFIGDIR" in os.environ or not os.path.isdir(baked):
        return
    target = os.path.join(os.environ.get("TMPDIR") or "/tmp", ".sandpit-matplotlib")
    try:
        if not os.path.isdir(target):
            os.makedirs(target, mode=0o700, exist_ok=True)
            for name in os.listdir(baked):
                with open(os.path.join(baked, name), "rb") as src, open(os.path.join(target, name), "wb") as dst:
                    dst.write(src.read())
        os.environ["MPLCONFIGDIR"] = target
    except OSError:
        pass


_seed()
PY
echo 'import sandpit_mplconfig' >"$site/sandpit-matplotlib.pth"

# The default backend, for every program (and a plain `docker run` of the image), in place of Debian's.
if grep -q '^backend *:' /etc/matplotlibrc; then
  sed -i 's|^backend *:.*|backend: module://sandpit_matplotlib|' /etc/matplotlibrc
else
  echo 'backend: module://sandpit_matplotlib' >>/etc/matplotlibrc
fi

# The font cache, built once here.
mkdir -p "$baked"
MPLCONFIGDIR=$baked python3 -c 'import matplotlib.pyplot as plt; plt.figure(); import matplotlib.font_manager'
ls "$baked"/fontlist-*.json >/dev/null
chmod -R a+rX "$baked"
python3 -m py_compile "$site/sandpit_matplotlib.py" "$site/sandpit_mplconfig.py"
