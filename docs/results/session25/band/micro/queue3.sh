#!/bin/bash
# after queue2: A (main, baa3528) vs B (h24) A B B A on equal and on 400+100 rails, then the
# band on B and a second repetition on A, interleaved (each step its own lock)
D=$(dirname $(readlink -f $0))
while pgrep -f "queue2.sh" > /dev/null; do sleep 5; done
RATE=400mbit SPECS="allreduce:4K:32K allgather:1K:8K reduce_scatter:8K:32K" $D/run_micro.sh $D/ab-equal.txt $D/ab.sh
RATE=400mbit,100mbit SPECS="allreduce:8K:128K allgather:2K:32K reduce_scatter:8K:128K" $D/run_micro.sh $D/ab-unequal.txt $D/ab.sh
TREE=/work/h24 TAG=-new $D/../run.sh equal
TREE=/work/h24-base TAG=-main2 $D/../run.sh equal
TREE=/work/h24 TAG=-new $D/../run.sh unequal
TREE=/work/h24-base TAG=-main2 $D/../run.sh unequal
