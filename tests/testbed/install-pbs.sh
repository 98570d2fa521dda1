#!/usr/bin/env bash
# install-pbs.sh: installs the Debian packages OpenPBS 23.06 needs to be
# built from ../shared/vendor/ and to run (pbs-up.sh builds it; see
# ../shared/TESTBED-NOTES.md section 5).  Idempotent; never starts a daemon
# (policy-rc.d says "no" first when the image has none: postgresql's
# postinst would otherwise start a cluster).  Not sendmail-bin, which
# PBS's INSTALL lists: it replaces exim4, which Grid Engine pulled in.
set -euo pipefail
. "$(dirname "$0")/batch-lib.sh"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

pkgs=(gcc g++ make libtool autoconf automake libhwloc-dev libx11-dev libxt-dev libedit-dev
      libical-dev libncurses-dev perl postgresql-server-dev-all postgresql-contrib python3-dev
      tcl-dev tk-dev swig libexpat1-dev libssl-dev libxext-dev libxft-dev libcjson-dev expat
      libedit2 postgresql python3 sudo tcl tk libical3 iproute2 util-linux)
tb_apt_install $(tb_apt_missing "${pkgs[@]}")
# PBS refuses jobs from root ("Bad UID for job execution"): tests submit as
# `competitor` (install-batch.sh creates it too) or their login user.
if ! id -u competitor >/dev/null 2>&1; then
  $sudo useradd --create-home --shell /bin/sh competitor
fi
