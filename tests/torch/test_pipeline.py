"""OctoPipe plans run in torch.distributed.pipelining (CPU, gloo, 2 and 4 processes).

For each plan (1f1b, interleaved i1f1b, zbv, dualpipev and the tuner's own plan, which is
irregular at P=4): `octopipe export` writes the compute_only CSV, the compute_comms CSV and the
stage map; every rank builds its stages of a small model with every layer kind of the C
reference model (ref_model.py), loads the actions into torch's _PipelineScheduleRuntime and runs
one step.  Checked: loss and every parameter gradient equal the single-process step (fp32,
relative error <= 1e-5), the executed F/I/W/B order per rank equals the plan's, and the comms
CSV equals torch's own lowering (every plan) and runs to the same numbers (zbv and the tuned
plan: the I/W split and the irregular map).  The tuned plan runs once more with the
activation policies full, offload, selective and keep over its stages in turn: the same
numbers, and every layer of a full stage runs its forward twice per microbatch (the
recomputation), the others once; a stage with dropout recomputes with the forward's masks.  A deadlocking order is refused
by `octopipe export --check-csv` and by torch's loader before any step runs.

Usage: test_pipeline.py OCTOPIPE WORKDIR
"""
import copy
import json
import os
import subprocess
import sys
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import octopipe_torch as ot  # noqa: E402
import ref_model as R  # noqa: E402

PATTERN = "EM*-#M*-#*-L"  # 12 layers: every kind, enough for 2 stages per rank at P=4
PLANS = ["1f1b", "i1f1b", "zbv", "dualpipev", "octopipe"]
COMMS_RUNS = ("zbv", "octopipe")  # plans also run from the compute_comms CSV
ACTS = ("full", "offload", "selective", "keep")  # stage s of the policy run gets ACTS[s % 4]
MBS = 2  # samples per microbatch
TOL = 1e-5
CFG = dict(R.TINY, aux_coef=0.0)  # the balance loss is a side output torch's schedule drops


def profile(path):
    ms = {"E": 0.2, "M": 1.0, "*": 1.3, "-": 0.6, "#": 1.6, "L": 2.5}
    js = {"pattern": PATTERN, "forward_ms": ms,
          "backward_ms": {k: v * 1.1 for k, v in ms.items()},
          "weight_ms": {k: v * 0.8 for k, v in ms.items()}}
    with open(path, "w") as f:
        json.dump(js, f)


def batch(M):
    g = torch.Generator().manual_seed(7)
    tok = torch.randint(0, CFG["vocab"], (M * MBS, CFG["seq"]), generator=g)
    tgt = torch.randint(0, CFG["vocab"], (M * MBS, CFG["seq"]), generator=g)
    return tok, tgt


def reference(M):
    """Single process: mean over microbatches of each microbatch's mean cross-entropy."""
    layers = R.build_layers(PATTERN, CFG, seed=3)
    tok, tgt = batch(M)
    losses = []
    for t, y in zip(tok.chunk(M), tgt.chunk(M)):
        x = t
        for l in layers:
            x = l(x)
        loss = R.ce_loss(x, y)
        (loss / M).backward()
        losses.append(loss.item())
    return losses, [l.p.grad.clone() for l in layers]


def worker(rank, P, cases, work):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{work}/pg", rank=rank, world_size=P)
    try:
        for name, plan_path, csv_path, fmt in cases:
            plan = ot.load_plan(plan_path)
            if name.endswith("+acts"):
                plan.activation = [ACTS[s % len(ACTS)] for s in range(plan.S)]
            layers = R.build_layers(PATTERN, CFG, seed=3)  # same seed: same weights everywhere
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                stages = ot.build_stages(plan, rank, layers, torch.device("cpu"))
            sel_warned = sum("selective policy" in str(w.message) for w in caught)
            runs, active = {}, [0]

            def count(m, i):  # inside the plan's actions: not torch's metadata-inference probe
                if active[0]:
                    runs[m.index] = runs.get(m.index, 0) + 1

            def within(f):
                def g(*a, **k):
                    active[0] += 1
                    try:
                        return f(*a, **k)
                    finally:
                        active[0] -= 1
                return g
            for st in stages:
                for l in st.submod.layers:
                    l.register_forward_pre_hook(count)
                st.forward_one_chunk = within(st.forward_one_chunk)
                st.backward_one_chunk = within(st.backward_one_chunk)
                st.backward_weight_one_chunk = within(st.backward_weight_one_chunk)
            tok, tgt = batch(plan.M)
            losses, log = ot.run_step(plan, rank, stages, R.ce_loss, tok, tgt, csv_path, fmt)
            mine = {l.index: l.p.grad.clone() for st in stages for l in st.submod.layers}
            torch.save({"losses": losses, "log": log, "grads": mine, "runs": runs, "sel_warned": sel_warned},
                       os.path.join(work, f"{name}.{fmt}.r{rank}.pt"))
            dist.barrier()
    finally:
        dist.destroy_process_group()


def recompute_with_dropout():
    """A stage with dropout under "full": the re-run must draw the forward's masks (the RNG state
    at the forward restored for it) and leave the caller's stream where the forward left it.
    Returns (input grads equal, weight grads equal, next random number equal) against keep."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Dropout(0.5), torch.nn.GELU(),
                            torch.nn.Linear(16, 4))
    x = torch.randn(5, 8, requires_grad=True)

    def run(policy):
        for p in m.parameters():
            p.grad = None
        torch.manual_seed(1)
        y = ot._apply_policy(policy, m, x)
        after = torch.rand(1)
        gx, = torch.autograd.grad(y.sum(), x, retain_graph=True)  # I, then W: two calls
        y.sum().backward()
        return gx, [p.grad.clone() for p in m.parameters()], after

    a, b = run("keep"), run("full")
    return (torch.equal(a[0], b[0]), all(torch.equal(u, v) for u, v in zip(a[1], b[1])),
            torch.equal(a[2], b[2]))


def rel(a, b):
    return float((a.double() - b.double()).norm() / max(b.double().norm(), 1e-30))


def main():
    octopipe, work = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    prof = os.path.join(work, "profile.json")
    profile(prof)
    passed = failed = 0

    def check(ok, what):
        nonlocal passed, failed
        passed += bool(ok)
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}")

    gi, gw, rng = recompute_with_dropout()
    check(gi and gw and rng, f"full recomputation with dropout: input grads equal {gi}, weight "
          f"grads equal {gw}, the caller's RNG stream unchanged {rng}")

    for P, M in ((2, 4), (4, 8)):
        d = os.path.join(work, f"p{P}")
        os.makedirs(d, exist_ok=True)
        subprocess.run([octopipe, "compare", "--model", prof, "--devices", str(P), "--microbatches",
                        str(M), "--seq", str(CFG["seq"]), "--mbs", str(MBS), "--comm", "none",
                        "--plans-dir", d], check=True, stdout=subprocess.DEVNULL)
        cases = []
        for name in PLANS:
            pj = os.path.join(d, f"{name}.json")
            if not os.path.exists(pj):
                check(False, f"P={P} {name}: no plan written")
                continue
            base = os.path.join(d, name)
            r = subprocess.run([octopipe, "export", pj, "--torch-csv", base + ".csv",
                                "--torch-comms-csv", base + ".comms.csv", "--torch-stage-map",
                                base + ".map.json"], capture_output=True, text=True)
            check(r.returncode == 0, f"P={P} {name}: octopipe export ({r.stderr.strip()[-200:]})")
            if r.returncode:
                continue
            plan = ot.load_plan(pj)
            smap = json.load(open(base + ".map.json"))
            # torch's own loader: validation, stage -> rank inference, lowering, dry run
            m, low = ot.check_plan(plan.P, plan.S, plan.M, base + ".csv")
            check(m == plan.stage_to_rank and smap["stage_to_rank"] == [plan.stage_to_rank[s] for s in range(plan.S)],
                  f"P={P} {name}: torch infers the plan's stage map ({smap['style']}, S={plan.S})")
            ours = [l.split(",") for l in open(base + ".comms.csv").read().splitlines()]
            check(ours == low, f"P={P} {name}: comms CSV equals torch's lowering")
            cases.append((name, pj, base + ".csv", "compute_only"))
            if name in COMMS_RUNS:  # the lowered file runs too (every one is compared above)
                cases.append((name, pj, base + ".comms.csv", "compute_comms"))
            if name == "octopipe":  # the same actions with activation policies on its stages
                cases.append((name + "+acts", pj, base + ".csv", "compute_only"))
        mp.spawn(worker, args=(P, cases, d), nprocs=P, join=True)
        ref_losses, ref_grads = reference(M)
        for name, pj, _, fmt in cases:
            plan = ot.load_plan(pj)
            res = [torch.load(os.path.join(d, f"{name}.{fmt}.r{r}.pt")) for r in range(P)]
            losses = [l for x in res for l in x["losses"]]
            lerr = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses)) if len(losses) == M else 1
            grads = {}
            for x in res:
                grads.update(x["grads"])
            gerr = max(rel(grads[i], ref_grads[i]) for i in range(len(ref_grads))) \
                if len(grads) == len(ref_grads) else 1
            same = all([tuple(a) for a in x["log"]] == [tuple(a) for a in plan.schedule[r]]
                       for r, x in enumerate(res))
            tag = f"P={P} {name:9s} {fmt:13s}"
            check(lerr <= TOL, f"{tag} loss rel err {lerr:.1e} over {M} microbatches")
            check(gerr <= TOL, f"{tag} max grad rel err {gerr:.1e} over {len(ref_grads)} layers")
            check(same, f"{tag} executed order equals the plan's on all {P} ranks")
            if name.endswith("+acts"):
                runs = {}
                for x in res:
                    runs.update(x["runs"])
                want = {l: M * (2 if ACTS[s % len(ACTS)] == "full" else 1)
                        for s, (a, b) in enumerate(plan.stages) for l in range(a, b)}
                # a rank with a selective stage is told once that it runs as keep; others not
                warned = [x["sel_warned"] for x in res]
                has_sel = [any(ACTS[s % len(ACTS)] == "selective" for s in plan.stages_of(r))
                           for r in range(P)]
                check(warned == [int(h) for h in has_sel],
                      f"{tag} selective stages warned once per rank holding one ({warned})")
                check(runs == want, f"{tag} forwards per layer: twice per microbatch in full "
                      f"stages, once elsewhere ({sum(runs.values())} runs, want {sum(want.values())}"
                      + ("" if runs == want else f": {sorted(runs.items())}") + ")")

    # a deadlocking order: counts and F-before-B are fine, the send/recv lowering is stuck
    d = os.path.join(work, "p2")
    bad = os.path.join(work, "deadlock.csv")
    pj = os.path.join(work, "dl.json")
    subprocess.run([octopipe, "compare", "--model", prof, "--devices", "2", "--microbatches", "2",
                    "--seq", "16", "--comm", "none", "--no-tune", "--plans-dir", work],
                   check=True, stdout=subprocess.DEVNULL)
    plan = ot.load_plan(os.path.join(work, "1f1b.json"))
    with open(bad, "w") as f:
        f.write("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n")
    r = subprocess.run([octopipe, "export", os.path.join(work, "1f1b.json"), "--check-csv", bad],
                       capture_output=True, text=True)
    check(r.returncode != 0 and "Malformed compute schedule" in r.stderr,
          f"deadlock refused by octopipe: {r.stderr.strip().split(': ', 2)[-1][:150]}")
    try:
        ot.check_plan(2, plan.S, 2, bad)
        check(False, "deadlock refused by torch's loader")
    except Exception as e:  # torch raises AssertionError("Malformed compute schedule ...")
        check("Malformed" in str(e), f"deadlock refused by torch's loader: {str(e)[:60]}")
    print(f"tests: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
