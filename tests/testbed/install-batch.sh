#!/usr/bin/env bash
# install-batch.sh: installs what the Slurm and Grid Engine test beds need
# (slurm-wlm, slurmctld, slurmd, slurm-client, munge; gridengine-master,
# -exec, -client) and creates the users the batch tests use.  Idempotent:
# packages already there are not touched, users already there are kept.
#
# Never starts a daemon: a policy-rc.d that says "no" is put in place first
# when the image has none.  Grid Engine's debconf questions are answered
# beforehand so its postinst runs init_cluster unattended (cell "default",
# this host as master; see ../shared/TESTBED-NOTES.md section 2).
set -euo pipefail
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

pkgs=(slurm-wlm slurmctld slurmd slurm-client munge
      gridengine-master gridengine-exec gridengine-client util-linux)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
    $sudo chmod 755 /usr/sbin/policy-rc.d
  fi
  host=$(hostname)
  for owner in gridengine-common gridengine-client gridengine-master; do
    printf '%s shared/gridengineconfig boolean true\n' "$owner"
    printf '%s shared/gridenginecell string default\n' "$owner"
    printf '%s shared/gridenginemaster string %s\n' "$owner" "$host"
  done | $sudo debconf-set-selections
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# `competitor` fills the queue in the batch tests; a plain user with a
# home, so its jobs can write their output files.
if ! id -u competitor >/dev/null 2>&1; then
  $sudo useradd --create-home --shell /bin/sh competitor
fi
