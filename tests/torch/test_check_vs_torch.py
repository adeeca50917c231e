"""Differential test: the C port of torch's CSV rules (csv_check, src/export/torch_check.c)
against torch itself (octopipe_torch.check_plan: torch's _load_csv and dry run) on random
schedules: random stage -> rank maps (unequal counts allowed), random per-rank interleavings
(many deadlock), B or I+W per stage, and some broken on purpose (an action dropped, duplicated
or moved before its forward).  Both must accept or refuse the same CSVs, refuse for the same
kind of reason, and lower the accepted ones to the same compute_comms rows.  One difference is
on purpose: a repeated action passes torch's loader (it keeps sets) and is refused by the C port.

Usage: test_check_vs_torch.py CSV_CHECK WORKDIR [N]
"""
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import octopipe_torch as ot  # noqa: E402


def random_csv(rng):
    P = rng.randint(2, 4)
    S = rng.randint(P, 2 * P + 1)
    M = rng.randint(1, 4)
    ranks = list(range(P)) + [rng.randrange(P) for _ in range(S - P)]
    rng.shuffle(ranks)
    split = [rng.random() < 0.5 for _ in range(S)]
    rows = [[] for _ in range(P)]
    for r in range(P):
        # per (stage, mb) chains F -> B or F -> I -> W, interleaved at random, order kept
        chains = []
        for s in (s for s in range(S) if ranks[s] == r):
            for m in range(M):
                chains.append([f"{s}F{m}"] + ([f"{s}I{m}", f"{s}W{m}"] if split[s] else [f"{s}B{m}"]))
        if rng.random() < 0.5:  # any interleaving of the first few chains: mostly deadlocks
            while chains:
                k = rng.randrange(min(len(chains), 2 + rng.randrange(3)))
                rows[r].append(chains[k].pop(0))
                if not chains[k]:
                    chains.pop(k)
        else:  # pipeline-like: sort by a noisy time (F down the stages, backward back up)
            keyed = []
            for ch in chains:
                s, m = int(ch[0].split("F")[0]), int(ch[0].split("F")[1])
                t = [m + 0.5 * s, m + 0.5 * (2 * S - s) + 0.3 * M, m + S + M + 2 * rng.random()]
                t = [x + rng.gauss(0, 0.4) for x in t]
                for j in range(1, len(t)):  # keep F < I/B < W within the chain
                    t[j] = max(t[j], t[j - 1] + 1e-3)
                keyed += [(t[j], a) for j, a in enumerate(ch)]
            rows[r] = [a for _, a in sorted(keyed)]
    kind = rng.random()
    if kind < 0.1:  # drop one action
        r = rng.randrange(P)
        rows[r].pop(rng.randrange(len(rows[r])))
    elif kind < 0.15:  # duplicate one
        r = rng.randrange(P)
        rows[r].insert(rng.randrange(len(rows[r]) + 1), rng.choice(rows[r]))
    elif kind < 0.2:  # move a backward to the front
        r = rng.randrange(P)
        bw = [i for i, a in enumerate(rows[r]) if "F" not in a]
        if bw:
            rows[r].insert(0, rows[r].pop(rng.choice(bw)))
    return P, S, M, rows


def reason(msg):
    for key in ("Malformed", "not progressing", "without first running", "duplicate",
                "assigned to both", "microbatches", "never appears"):
        if key.lower() in msg.lower():
            return "counts" if key in ("microbatches", "never appears") else key
    return msg[:60]


def main():
    tool, work = sys.argv[1], os.path.abspath(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 400
    os.makedirs(work, exist_ok=True)
    rng = random.Random(12)
    passed = failed = 0
    seen = {}
    for i in range(n):
        P, S, M, rows = random_csv(rng)
        path = os.path.join(work, f"c{i}.csv")
        with open(path, "w") as f:
            f.write("\n".join(",".join(r) for r in rows) + "\n")
        c = subprocess.run([tool, path, str(P), str(S), str(M)], capture_output=True, text=True)
        c_ok = c.returncode == 0
        try:
            _, low = ot.check_plan(P, S, M, path)
            t_ok, t_why = True, ""
        except Exception as e:  # torch's AssertionError / ValueError
            t_ok, low, t_why = False, None, f"{type(e).__name__}: {e}"
        if c_ok and t_ok:
            ours = [l.split(",") for l in c.stdout.splitlines()]
            ok, what = ours == low, "accepted by both, lowered rows " + ("equal" if ours == low else "DIFFER")
        elif not c_ok and not t_ok:
            # torch's duplicate actions pass its own validation (it keeps sets) and trip later:
            # ours refuses them up front, so only the verdict is compared for those
            rc, rt = reason(c.stdout), reason(t_why)
            ok = rc == rt or rc == "duplicate"
            what = f"refused by both ({rc} / {rt})"
        elif not c_ok and reason(c.stdout) == "duplicate":
            # torch keeps per-stage sets, so a repeated action passes its loader and lowering and
            # only goes wrong when it runs twice: the C port refuses it on purpose
            ok, what = True, "duplicate: refused by C only (stricter on purpose)"
        else:
            ok, what = False, f"C {'accepts' if c_ok else 'refuses'} ({c.stdout.strip()[:120]}), torch {'accepts' if t_ok else 'refuses'} ({t_why[:120]})"
        key = (what if c_ok or what.startswith("duplicate") else "refused by both: " + reason(c.stdout)) \
            if ok else "mismatch"
        seen[key] = seen.get(key, 0) + 1
        passed += ok
        failed += not ok
        if not ok:
            print(f"FAIL case {i} P={P} S={S} M={M}: {what}\n  " + "\n  ".join(",".join(r) for r in rows))
    print("verdicts: " + ", ".join(f"{k}: {v}" for k, v in sorted(seen.items())))
    print(f"tests: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
