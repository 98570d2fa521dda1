#!/usr/bin/env bash
# install-sshd.sh: installs what the sshd and network-namespace test beds
# need (openssh-server, iproute2, util-linux for nsenter, nftables for the
# login node's firewall in cluster-up.sh).  Idempotent: does
# nothing when they are there.  Never starts a daemon: a policy-rc.d that
# says "no" is put in place first when the image has none.
set -euo pipefail
. "$(dirname "$0")/batch-lib.sh"

tb_apt_install $(tb_apt_missing openssh-server openssh-client iproute2 util-linux nftables)
