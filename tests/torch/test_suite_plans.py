"""Every default tuned plan of the bench suite at P in {4, 8} (the models of bench_plan.c,
M in {2P, 4P}, seq 4096, limit 80 GiB as there; a model no schedule fits runs without a limit,
as the bench does) exports without any force flag, and loads in torch's runtime: torch's own
_load_csv (validation, stage -> rank inference, compute_comms lowering) and its dry run accept
it, the stage map torch infers is the plan's, and `--torch-comms-csv` equals torch's lowering.

Usage: test_suite_plans.py OCTOPIPE WORKDIR
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import octopipe_torch as ot  # noqa: E402

MODELS = ["deepseek-v2-lite", "gemma2-9b", "jamba-v0.1", "llama2-7b", "mixtral-8x7b",
          "nemotron-h-8b", "qwen2-vl-7b"]


def main():
    octopipe, work = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    passed = failed = 0
    styles = {}
    t0 = time.time()
    for P in (4, 8):
        for M in (2 * P, 4 * P):
            for model in MODELS:
                base = os.path.join(work, f"{model}.P{P}.M{M}")
                cmd = [octopipe, "plan", "--model", model, "--devices", str(P), "--microbatches",
                       str(M), "--seq", "4096", "--quiet", "--out", base + ".json"]
                r = subprocess.run(cmd + ["--mem-limit", "80"], capture_output=True, text=True)
                if r.returncode:  # nothing fits 80 GiB: the bench compares without a limit
                    r = subprocess.run(cmd + ["--mem-limit", "none"], capture_output=True, text=True)
                tag = f"{model:16s} P={P} M={M:2d}"
                if r.returncode:
                    failed += 1
                    print(f"FAIL {tag}: plan: {r.stderr.strip()[-200:]}")
                    continue
                r = subprocess.run([octopipe, "export", base + ".json", "--torch-csv", base + ".csv",
                                    "--torch-comms-csv", base + ".comms.csv", "--torch-stage-map",
                                    base + ".map.json"], capture_output=True, text=True)
                if r.returncode:
                    failed += 1
                    print(f"FAIL {tag}: export refused: {r.stderr.strip()[-300:]}")
                    continue
                plan = ot.load_plan(base + ".json")
                smap = json.load(open(base + ".map.json"))
                try:
                    m, low = ot.check_plan(plan.P, plan.S, plan.M, base + ".csv")
                    ours = [l.split(",") for l in open(base + ".comms.csv").read().splitlines()]
                    ok = m == plan.stage_to_rank and ours == low
                    why = "" if ok else ("stage map differs" if m != plan.stage_to_rank else
                                         "comms CSV differs from torch's lowering")
                    # and the lowered file loads as compute_comms
                    ot.check_plan(plan.P, plan.S, plan.M, base + ".comms.csv", fmt="compute_comms")
                except Exception as e:  # what torch raised
                    ok, why = False, f"torch: {str(e)[:300]}"
                per = [len(plan.stages_of(r)) for r in range(plan.P)]
                style = smap["style"] + ("" if len(set(per)) == 1 else ", unequal stages/rank")
                styles[style] = styles.get(style, 0) + 1
                passed += ok
                failed += not ok
                print(f"{'ok  ' if ok else 'FAIL'} {tag} S={plan.S:2d} {style:28s} stages/rank {per} {why}")
    print(f"placements: {json.dumps(styles, sort_keys=True)}; {time.time() - t0:.0f} s")
    print(f"tests: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
