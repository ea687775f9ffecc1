#!/bin/bash
# ABBA over variants: ab.sh "H L" "label:tree:extra-env ..." (run under flock -x)
LAYOUTS=${LAYOUTS:-"2x4 4x2"}
for lay in $LAYOUTS; do H=${lay%x*}; L=${lay#*x}
 for v in "$@"; do lab=${v%%:*}; rest=${v#*:}; t=${rest%%:*}; ex=${rest#*:}
  xs=""; for kv in $ex; do xs="$xs -x $kv"; done
  echo "$(date -u +%T) ${H}x${L} $lab $(/tmp/hA/run1.sh $H $L $t $xs)"
 done
done
