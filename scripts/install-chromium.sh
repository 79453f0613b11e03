#!/usr/bin/env bash
# install-chromium.sh - make sure a headless browser is here for the test
# that renders the demo's HTML timeline (cmd/demo TestTimelineInChromium):
# Debian's chromium, run there as `chromium --headless --no-sandbox` (the
# sandbox does not run as root, as CI does).
#
# Missing and running as root with apt-get: installs chromium, with the
# fonts it recommends (about 20 s here).
# Missing otherwise: says what to install, and fails if ZK_REQUIRED=1
# (without it the test checks the page but does not render it).
set -euo pipefail

for b in chromium chromium-browser google-chrome headless_shell; do
  command -v "$b" >/dev/null 2>&1 && exit 0
done

if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "install-chromium.sh: no chromium; installing it" >&2
  t0=$(date +%s)
  if DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
     DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null &&
     command -v chromium >/dev/null 2>&1; then
    echo "install-chromium.sh: installed in $(( $(date +%s) - t0 )) s ($(chromium --version 2>/dev/null | head -1))" >&2
    exit 0
  fi
  echo "install-chromium.sh: apt-get failed" >&2
  [[ ${ZK_REQUIRED:-} == 1 ]] && exit 1
  exit 0
fi

echo "install-chromium.sh: no chromium; install it with: apt-get install chromium" >&2
[[ ${ZK_REQUIRED:-} == 1 ]] && exit 1
exit 0
