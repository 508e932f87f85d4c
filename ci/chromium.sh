#!/usr/bin/env bash
# Headless Chromium for tests/test_report_html.py: Debian's `chromium` package.
# Idempotent: does nothing when /usr/bin/chromium is already there. Needs root (CI
# runs as root; a person runs it with sudo).
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium
/usr/bin/chromium --version
