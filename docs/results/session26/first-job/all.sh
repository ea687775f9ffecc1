#!/bin/bash
# one hold of the timing lock: run2 (1 round, --reps as given), the page-touch micro, run3
# (1 round). flock -x /tmp/nezha-quiet.lock bash all.sh
cd /work/h30/docs/results/session26/first-job
ROUNDS=1 bash run2.sh g
ROUNDS=1 bash run3.sh s
