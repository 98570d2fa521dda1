#!/bin/sh
# check-seam.sh SOURCE_ROOT: the drivers' tables stay inside site-drivers/.
#
# Everything else in datc (master/, analysis/, tests/, benchmarks/, ...)
# goes through the datc_site_* and datc_scheduler_* calls of driver.h and
# never reads a scheduler's or transport's table: argv builders, parsers
# and scripts change behind that seam without the rest of datc noticing.
# The compiler keeps the tables out of driver.h; this keeps anyone from
# including them back.  Prints each offending line and exits 1.
set -eu
root=${1:?usage: check-seam.sh SOURCE_ROOT}
cd "$root"
pattern='drivers-private\.h|scheduler-batch\.h|DatcSchedulerClass|DatcTransportClass|DatcSchedulerArrays|datc_scheduler_lookup|datc_transport_lookup|datc_transport_local_'
found=$(find . -path ./site-drivers -prune -o -path './build*' -prune -o -path ./.git -prune \
          -o -type f \( -name '*.c' -o -name '*.h' \) -print |
        sort | xargs grep -nE "$pattern" || true)
if [ -n "$found" ]; then
  echo "check-seam: only site-drivers/ may use the drivers' tables; use driver.h's calls instead:" >&2
  echo "$found" >&2
  exit 1
fi
echo "check-seam: the drivers' tables are used inside site-drivers/ only"
