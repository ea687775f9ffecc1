#!/bin/bash
# main's tree (baa3528, /work/h24-base): the band on 400+100, then every algorithm forced on
# equal and on 400+100 rails (one lab each)
D=$(dirname $(readlink -f $0))
while ! grep -q "rc=" /tmp/h24/build-base.log; do sleep 5; done
TREE=/work/h24-base TAG=-main $D/../run.sh unequal
export TREE=/work/h24-base TB=0.2 EXTRA_V="ringp1k autop1k"
RATE=400mbit $D/run_micro.sh $D/forced-equal.txt $D/both.sh
RATE=400mbit,100mbit $D/run_micro.sh $D/forced-unequal.txt $D/both.sh
