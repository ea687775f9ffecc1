#!/bin/bash
# the band on B (h24) and a second repetition on A (main, baa3528), interleaved, in ONE
# exclusive lock: equal-new, equal-main2, unequal-new, unequal-main2 (each compare builds
# and removes its lab)
D=$(dirname $(readlink -f $0))
flock -x /tmp/nezha-quiet.lock bash -c "
  FLOCKED=1 TREE=/work/h24 TAG=-new $D/run.sh equal
  FLOCKED=1 TREE=/work/h24-base TAG=-main2 $D/run.sh equal
  FLOCKED=1 TREE=/work/h24 TAG=-new $D/run.sh unequal
  FLOCKED=1 TREE=/work/h24-base TAG=-main2 $D/run.sh unequal"
