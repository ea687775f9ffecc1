#!/bin/bash
cd /tmp/hC
export STEPS=30
L="flock -s /tmp/nezha-quiet.lock"
$L ./ddp.sh g64 gloo --dtype float64
NEZHA_RAILS=loop NEZHA_LOOP_RAILS=2 $L ./ddp.sh n64 nezha --dtype float64
$L ./ddp.sh g32b gloo
$L ./ddp.sh g32-b9 gloo --bucket-mb 9
NEZHA_RAILS=loop NEZHA_LOOP_RAILS=1 $L ./ddp.sh n1a nezha
NEZHA_RAILS=loop NEZHA_LOOP_RAILS=1 $L ./ddp.sh n1b nezha
NEZHA_RAILS=loop NEZHA_LOOP_RAILS=2 $L ./ddp.sh n2b nezha
NEZHA_RAILS=loop NEZHA_LOOP_RAILS=2 NEZHA_SPLIT=equal $L ./ddp.sh n2ea nezha
NEZHA_RAILS=loop NEZHA_LOOP_RAILS=2 NEZHA_SPLIT=equal $L ./ddp.sh n2eb nezha
#!/bin/bash
cd /tmp/hC
while pgrep -f matrix.sh >/dev/null; do sleep 5; done
export STEPS=50
L="flock -s /tmp/nezha-quiet.lock"
$L ./ddp.sh gg32 gloo --act gelu
NEZHA_RAILS=loop NEZHA_LOOP_RAILS=2 $L ./ddp.sh ng32a nezha --act gelu --compare-losses /tmp/hC/gg32.json
$L ./ddp.sh gg32-b9 gloo --act gelu --bucket-mb 9
NEZHA_RAILS=loop NEZHA_LOOP_RAILS=2 $L ./ddp.sh ng32b nezha --act gelu --compare-losses /tmp/hC/gg32.json
#!/bin/bash
cd /tmp/hC
while pgrep -f matrix2.sh >/dev/null; do sleep 5; done
export STEPS=20 NPROC=2
L="flock -s /tmp/nezha-quiet.lock"
$L ./ddp.sh two-g gloo --width 384 --bucket-mb 0.5
NEZHA_RAILS=loop NEZHA_LOOP_RAILS=2 $L ./ddp.sh two-n nezha --width 384 --bucket-mb 0.5 --compare-losses /tmp/hC/two-g.json --compare-rel 0
$L ./ddp.sh two-n-shm nezha --width 384 --bucket-mb 0.5 --compare-losses /tmp/hC/two-g.json --compare-rel 0
