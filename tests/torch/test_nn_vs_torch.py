"""The C reference model (src/nn) against torch autograd, layer by layer.

torch writes weights and a batch (safetensors), the C tool nn_ref reads them and runs every
layer's F, I and W; torch runs the same model (ref_model.py, the same math) with autograd.
Per layer: forward output, input gradient (C: I) and weight gradient (C: W) must agree to a
relative error (||c - t|| / ||t||) <= 1e-5 in fp32, and the losses too: so I + W together are
torch's full backward.  Usage: test_nn_vs_torch.py NN_REF_BINARY WORKDIR
"""
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import ref_model as R  # noqa: E402
import stfile  # noqa: E402

TOL = 1e-5
KIND = {"E": "embedding", "M": "mamba scan", "*": "attention", "-": "mlp", "#": "moe", "L": "head+CE"}


def rel(a, b):
    a, b = a.double().flatten(), b.double().flatten()
    return float((a - b).norm() / max(b.norm(), 1e-30))


def run_case(binary, work, name, pattern, cfg, seed):
    torch.manual_seed(seed)
    layers = R.build_layers(pattern, cfg, seed=seed)
    N = cfg["batch"] * cfg["seq"]
    tokens = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]), dtype=torch.int32)
    targets = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]), dtype=torch.int32)
    targets[0, :3] = -1  # ignored rows, as the C head allows
    inp = os.path.join(work, f"{name}.in.safetensors")
    out = os.path.join(work, f"{name}.out.safetensors")
    tens = {f"layer.{i}": l.p for i, l in enumerate(layers)}
    tens["tokens"], tens["targets"] = tokens.reshape(N), targets.reshape(N)
    stfile.write(inp, tens, {"pattern": pattern, "cfg": json.dumps(cfg)})
    subprocess.run([binary, inp, out], check=True)
    c, _ = stfile.read(out)

    # torch: the same forward, keeping every layer's input for its gradient
    xs, x = [], tokens.long()
    for l in layers[:-1]:
        x = l(x)
        x.retain_grad()
        xs.append(x)
    ce = R.ce_loss(layers[-1](x), targets.long())
    aux = sum(l.aux for l in layers if l.sym == "#")
    (ce + aux).backward()

    fails, rows = 0, []
    for i, l in enumerate(layers):
        checks = []
        if l.sym != "L":
            checks.append(("y", c[f"y.{i}"], xs[i].detach().reshape(N, -1)))
        if i > 0:
            checks.append(("dx", c[f"dx.{i}"], xs[i - 1].grad.reshape(N, -1)))
        checks.append(("dw", c[f"dw.{i}"], l.p.grad))
        want_loss = ce if l.sym == "L" else (l.aux if l.sym == "#" else torch.tensor(0.0))
        checks.append(("loss", c[f"loss.{i}"], want_loss.detach().reshape(1)))
        for what, cv, tv in checks:
            err = rel(cv, tv) if tv.abs().max() > 0 else float((cv.double() - tv.double()).abs().max())
            ok = err <= TOL
            fails += not ok
            rows.append(f"{name:8s} layer {i:2d} {l.sym} {KIND[l.sym]:11s} {what:4s} rel err {err:.2e} "
                        f"{'ok' if ok else 'FAIL'}")
    return fails, rows


def main():
    binary, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(1)
    cases = [("tiny", "EM*-#L", dict(R.TINY), 1),
             ("window", "EM*-#M*-L", dict(R.TINY, window=5, shared_dim=0, top_k=1), 2)]
    passed = failed = 0
    for name, pattern, cfg, seed in cases:
        f, rows = run_case(binary, work, name, pattern, cfg, seed)
        print("\n".join(rows))
        failed += f
        passed += len(rows) - f
    print(f"tests: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
