#!/usr/bin/env bash
# install-lsf.sh: installs the Debian packages the volclava (LSF) test bed
# needs to build volclava 2.2 from ../shared/vendor/ and run it (see
# ../shared/TESTBED-NOTES.md section 5), and creates its users: `volclava`,
# the cluster administrator (volclava refuses root as one), and
# `competitor`, who fills the queue in the batch tests.  Idempotent.  The
# build itself is lsf-build.sh's, run by lsf-up.sh on first use.
set -euo pipefail
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

pkgs=(build-essential autoconf automake bison flex libtirpc-dev libnsl-dev tcl-dev
      libncurses-dev util-linux)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
    $sudo chmod 755 /usr/sbin/policy-rc.d
  fi
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

for user in volclava competitor; do
  id -u "$user" >/dev/null 2>&1 || $sudo useradd --create-home --shell /bin/sh "$user"
done
