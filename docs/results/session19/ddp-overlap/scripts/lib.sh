# common: python, trees, output dir, lab name
PY=/work/main/.venv/bin/python
O=/work/hC/docs/results/session19/ddp-overlap
LAB=hc19
intree() { local t=$1; shift; (cd $t && PYTHONPATH=$t "$@"); }
labup() { $PY -m nezha lab up --name $LAB --hosts 4 --rails 2 --rate 400mbit >> $O/lab.log 2>&1; }
labdown() { $PY -m nezha lab down --name $LAB >> $O/lab.log 2>&1; }
