#!/usr/bin/env bash
# install-lsf.sh: installs the Debian packages the volclava (LSF) test bed
# needs to build volclava 2.2 from ../shared/vendor/ and run it (see
# ../shared/TESTBED-NOTES.md section 5), and creates its users: `volclava`,
# the cluster administrator (volclava refuses root as one), and
# `competitor`, who fills the queue in the batch tests.  Idempotent.  The
# build itself is lsf-build.sh's, run by lsf-up.sh on first use.
set -euo pipefail
. "$(dirname "$0")/batch-lib.sh"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

pkgs=(build-essential autoconf automake bison flex libtirpc-dev libnsl-dev tcl-dev
      libncurses-dev util-linux)
tb_apt_install $(tb_apt_missing "${pkgs[@]}")

for user in volclava competitor; do
  id -u "$user" >/dev/null 2>&1 || $sudo useradd --create-home --shell /bin/sh "$user"
done
