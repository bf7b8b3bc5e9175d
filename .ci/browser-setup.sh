#!/usr/bin/env bash
# What the browser test (tests/browser, marker "browser") needs on a fresh Debian machine:
# Debian's Chromium at /usr/bin/chromium, and JupyterLab plus Playwright's Python package.
# Playwright drives the system Chromium: never run `playwright install` (no browser download).
set -euo pipefail

if [ ! -x /usr/bin/chromium ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
  fi
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium
fi

# Already there when .ci/run installed them with the package; pip's resolver costs ~30 s otherwise.
python -c "import jupyterlab, playwright.sync_api" 2>/dev/null ||
  python -m pip install -q --root-user-action=ignore -c constraints.txt "jupyterlab>=4.2" "playwright>=1.45"

/usr/bin/chromium --version
python -c "import jupyterlab, playwright.sync_api; print('jupyterlab', jupyterlab.__version__)"
