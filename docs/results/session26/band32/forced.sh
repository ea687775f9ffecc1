#!/bin/bash
# Run inside run_micro.sh (lab up), tree A (main): its own choice (auto), tree B (h28, the
# slice priced in measured steps: new), and every algorithm on one rail and striped over
# both, in the order V1..V6 V6..V1 per collective (pieces.sh).
# one rail: NEZHA_MIN_RAIL_PIECE=1m; both: 1k. rd for allgather / reduce_scatter by the fixed
# rule (NEZHA_SMALL_MSG_THRESHOLD=1m), rab / ring by NEZHA_ALGO.
D=$(dirname $(readlink -f $0)); NEW=${NEW:-/work/h28}
SPECS=allreduce:8192:131072 REPORT="auto= new=PYTHONPATH=$NEW" \
VARIANTS="auto= new=PYTHONPATH=$NEW rab1=NEZHA_ALGO=rab,NEZHA_MIN_RAIL_PIECE=1m rab2=NEZHA_ALGO=rab,NEZHA_MIN_RAIL_PIECE=1k ring1=NEZHA_ALGO=ring,NEZHA_MIN_RAIL_PIECE=1m ring2=NEZHA_ALGO=ring,NEZHA_MIN_RAIL_PIECE=1k" \
  $D/pieces.sh
SPECS="reduce_scatter:8192:131072 allgather:2048:32768" REPORT=none \
VARIANTS="auto= new=PYTHONPATH=$NEW rd1=NEZHA_SMALL_MSG_THRESHOLD=1m,NEZHA_MIN_RAIL_PIECE=1m rd2=NEZHA_SMALL_MSG_THRESHOLD=1m,NEZHA_MIN_RAIL_PIECE=1k ring1=NEZHA_ALGO=ring,NEZHA_MIN_RAIL_PIECE=1m ring2=NEZHA_ALGO=ring,NEZHA_MIN_RAIL_PIECE=1k" \
  $D/pieces.sh
