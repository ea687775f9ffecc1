# single-process references and perturbation runs (tools/loss_reference.py), PYTHONPATH=/work/hC
P=/work/main/.venv/bin/python
$P tools/loss_reference.py --dtype float64 --out /tmp/hC/ref64.json
$P tools/loss_reference.py --dtype float32 --out /tmp/hC/ref32.json
$P tools/loss_reference.py --dtype float64 --perturb 1e-7 --out /tmp/hC/ref64p7.json
$P tools/loss_reference.py --dtype float32 --perturb 1e-7 --out /tmp/hC/ref32p7.json
$P tools/loss_reference.py --dtype float64 --perturb 1e-10 --out /tmp/hC/ref64p10.json
$P tools/loss_reference.py --dtype float64 --perturb 1e-4 --out /tmp/hC/ref64p4.json
for a in "--lr 0.01" "--lr 0.02" "--lr 0.01 --momentum 0" "--lr 0.002 --momentum 0.9"; do
  $P tools/loss_reference.py $a --dtype float64 --out ...; $P tools/loss_reference.py $a --dtype float64 --perturb 1e-7 --out ...
done
$P tools/loss_reference.py --act gelu --dtype float64 --out /tmp/hC/gref64.json
$P tools/loss_reference.py --act gelu --dtype float64 --perturb 1e-7 --out /tmp/hC/gref64p7.json
$P tools/loss_reference.py --act gelu --dtype float32 --out /tmp/hC/gref32.json
