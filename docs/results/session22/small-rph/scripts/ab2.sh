#!/bin/bash
for p in "2 4" "4 2"; do set -- $p
 for t in /work/hI-base /work/hI /work/hI /work/hI-base; do echo "== $t ${1}x${2}"; PROF_OSU=1 PROF_ONLY_WORLD=1 PROF_CALLS=2000 /tmp/h16/prof.sh $1 $2 $t 2>&1 | grep -E "world"; done
done
