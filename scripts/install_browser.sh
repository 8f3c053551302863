#!/usr/bin/env bash
# Install what the real-browser notebook tests (tests/browser/, marker `browser`) need:
#   - Debian's chromium (Playwright's own browser download is not used),
#   - JupyterLab and Playwright for Python in the active Python environment,
#   - selfheal itself (editable) so the notebook kernel can import it,
#   - a kernelspec pointing at this Python, so JupyterLab's kernel is this venv.
# Usage: source .venv/bin/activate && scripts/install_browser.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-python}"

# the browser the tests drive (tests/browser/lab_env.py find_chromium looks in the same places)
find_chromium() {
    if [ -n "${SELFHEAL_CHROMIUM:-}" ]; then echo "$SELFHEAL_CHROMIUM"; return; fi
    command -v chromium || command -v chromium-browser || \
        { [ -x /usr/lib/chromium/chromium ] && echo /usr/lib/chromium/chromium; } || true
}

if [ -z "$(find_chromium)" ]; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends chromium
fi

"$PY" -m pip install --quiet "jupyterlab>=4,<5" "notebook>=7,<8" "playwright>=1.40" ipywidgets
if ! "$PY" -m pip install --quiet --no-deps -e . ; then
    # The editable install needs every file the metadata names (README.md...). Fall back to a
    # .pth entry, which is what an editable install amounts to.
    SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    echo "$(pwd)" > "$SITE/selfheal-dev.pth"
    echo "pip install -e . failed; added $SITE/selfheal-dev.pth instead"
fi
# Register this interpreter as the default "python3" kernel of this environment.
"$PY" -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (selfheal)"

CHROMIUM="$(find_chromium)"
if [ -z "$CHROMIUM" ] || ! "$CHROMIUM" --version; then
    echo "install_browser.sh: no working chromium after the install (looked at \$SELFHEAL_CHROMIUM," \
         "chromium, chromium-browser, /usr/lib/chromium/chromium): install Debian's chromium" >&2
    exit 1
fi
"$PY" -c "import jupyterlab, playwright; print('jupyterlab', jupyterlab.__version__)"
