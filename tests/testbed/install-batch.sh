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
. "$(dirname "$0")/batch-lib.sh"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

pkgs=(slurm-wlm slurmctld slurmd slurm-client munge
      gridengine-master gridengine-exec gridengine-client util-linux)
mapfile -t missing < <(tb_apt_missing "${pkgs[@]}")

if [ "${#missing[@]}" -gt 0 ]; then
  host=$(hostname)
  for owner in gridengine-common gridengine-client gridengine-master; do
    printf '%s shared/gridengineconfig boolean true\n' "$owner"
    printf '%s shared/gridenginecell string default\n' "$owner"
    printf '%s shared/gridenginemaster string %s\n' "$owner" "$host"
  done | $sudo debconf-set-selections
  tb_apt_install "${missing[@]}"
fi

# `competitor` fills the queue in the batch tests; a plain user with a
# home, so its jobs can write their output files.
if ! id -u competitor >/dev/null 2>&1; then
  $sudo useradd --create-home --shell /bin/sh competitor
fi
