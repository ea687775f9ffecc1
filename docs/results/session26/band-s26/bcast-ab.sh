PY=/work/main/.venv/bin/python
run() { local tag=$1 tree=$2; (cd $tree && PYTHONPATH=$tree $PY -m nezha bench compare --rates 400mbit --collectives broadcast --systems nezha-all,mpi-all --min-size 2K --max-size 16K --reps 3 --reps-other 3 --time-budget 0.3 --out /tmp/bc-$tag > /tmp/bc-$tag.log 2>&1); echo "== $tag"; grep -E '^\| (2|4|8|16) KiB \|' /tmp/bc-$tag/compare.md | head -12; }
run new1 /work/main; run old1 /work/base26; run old2 /work/base26; run new2 /work/main
