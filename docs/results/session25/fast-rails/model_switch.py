"""The model's allreduce switch points (4 ranks on 4 hosts, 2 equal rails, failover votes) with
the probe's rail rates and the measured step (what the jobs used, plan lines) against the
lab's true rates and the same step; and its rab/ring time ratio at 1 MiB.
   PYTHONPATH=. python docs/results/session25/fast-rails/model_switch.py"""
from nezha.config import Config
from nezha.planner import layout_planner

cfg = Config.load()
for mbps, step in ((532, 80.3e-6), (800, 80.3e-6), (438, 133.8e-6), (800, 133.8e-6),
                   (644, 81.4e-6), (1600, 81.4e-6)):
    p = layout_planner(cfg, [0, 1, 2, 3], mbps=[mbps, mbps], failover=True)
    p.set_step_latency(step, "measured in the lab")
    t = p.flat_times("allreduce", 1 << 20)
    print(f"rails {mbps} Mbit/s, step {step * 1e6:.1f} us: {p.switch_table()['allreduce']}, "
          f"1 MiB rab/ring {t['rab'] / t['ring']:.3f}")
