PY=/work/main/.venv/bin/python
run() { local tag=$1; shift; (cd /work/main && env "$@" PYTHONPATH=/work/main $PY -m nezha bench compare --rates 400mbit --collectives broadcast --systems nezha-all,mpi-all --min-size 4K --max-size 16K --reps 3 --reps-other 3 --time-budget 0.3 --out /tmp/bc-$tag > /tmp/bc-$tag.log 2>&1); echo "== $tag $*"; grep -E '^\| (4|8|16) KiB \|' /tmp/bc-$tag/compare.md | head -3; }
run dflt1 X=1; run tree1 NEZHA_SMALL_MSG_THRESHOLD=32k; run chain1 NEZHA_SMALL_MSG_THRESHOLD=1k; run tree2 NEZHA_SMALL_MSG_THRESHOLD=32k; run dflt2 X=1; run chain2 NEZHA_SMALL_MSG_THRESHOLD=1k
