"""The C reference model (src/nn) written in torch, op for op, for two uses:
 - the C-vs-autograd check (test_nn_vs_torch.py): same weights, same batch, same numbers;
 - the pipeline runs (test_pipeline.py): a small model with every layer kind.

Shapes: B samples x T tokens, N = B*T rows, d hidden.  Blocks M * - # are pre-norm residual:
y = x + f(RMSNorm(x)).  Parameter layouts match src/nn/*.c (one flat vector per layer, in the
C order), so a weights file maps 1:1.  fp32 throughout.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

TINY = dict(vocab=256, d=32, seq=16, batch=4, n_heads=2, window=0, ssm_inner=64, ssm_state=8,
            ssm_conv=4, ssm_dt_rank=4, ffn=64, n_experts=4, top_k=2, expert_dim=32,
            shared_dim=32, aux_coef=0.01, norm_eps=1e-5)


def rmsnorm(x, g, eps):
    # C: rstd = 1/sqrt(mean(x^2) + eps) with the sum in double; y = x * rstd * g
    ms = (x.double() * x.double()).mean(-1, keepdim=True)
    rstd = (1.0 / torch.sqrt(ms + eps)).float()
    return x * rstd * g


def swiglu(ab, f):
    a, b = ab[..., :f], ab[..., f:]
    return F.silu(a) * b


def layer_nparams(sym, c):
    d = c["d"]
    if sym == "E":
        return (c["vocab"] + c["seq"]) * d
    if sym == "*":
        return d + 4 * d * d
    if sym == "-":
        return d + 3 * c["ffn"] * d
    if sym == "L":
        return d + c["vocab"] * d
    if sym == "#":
        E = c["n_experts"]
        return d + E * d + E * 3 * c["expert_dim"] * d + 3 * c["shared_dim"] * d
    if sym == "M":
        Di, S, K, R = c["ssm_inner"], c["ssm_state"], c["ssm_conv"], c["ssm_dt_rank"]
        P = R + 2 * S
        return d + 2 * Di * d + Di * K + Di + P * Di + Di * R + Di + Di * S + Di + d * Di
    raise ValueError(f"unknown layer symbol {sym!r}")


class Layer(nn.Module):
    """One layer: a flat parameter `p` in the C layout; forward(x) -> y (E: tokens -> x)."""

    def __init__(self, sym, c, index=0):
        super().__init__()
        self.sym, self.c, self.index = sym, c, index
        self.p = nn.Parameter(torch.empty(layer_nparams(sym, c)))
        self.aux = None  # MoE balance loss of the last forward

    def views(self):
        """Named views of p, in the C order (see the header of each src/nn/*.c)."""
        c, p, d, out, o = self.c, self.p, self.c["d"], {}, 0

        def take(name, *shape):
            nonlocal o
            n = math.prod(shape)
            out[name] = p[o:o + n].view(*shape)
            o += n

        s = self.sym
        if s == "E":
            take("wte", c["vocab"], d), take("wpe", c["seq"], d)
        elif s == "*":
            take("g", d), take("Wqkv", 3 * d, d), take("Wo", d, d)
        elif s == "-":
            take("g", d), take("W1", 2 * c["ffn"], d), take("W2", d, c["ffn"])
        elif s == "L":
            take("g", d), take("W", c["vocab"], d)
        elif s == "#":
            E, fe, fs = c["n_experts"], c["expert_dim"], c["shared_dim"]
            take("g", d), take("Wr", E, d)
            for e in range(E):
                take(f"W1_{e}", 2 * fe, d), take(f"W2_{e}", d, fe)
            if fs > 0:
                take("W1s", 2 * fs, d), take("W2s", d, fs)
        elif s == "M":
            Di, S, K, R = c["ssm_inner"], c["ssm_state"], c["ssm_conv"], c["ssm_dt_rank"]
            take("g", d), take("Win", 2 * Di, d), take("convw", Di, K), take("convb", Di)
            take("Wx", R + 2 * S, Di), take("Wdt", Di, R), take("bdt", Di)
            take("Alog", Di, S), take("D", Di), take("Wout", d, Di)
        assert o == p.numel()
        return out

    def init_(self, gen):
        """A random init in the spirit of the C one (scales per matrix); exact values are not
        the C ones: the weights file carries them across."""
        with torch.no_grad():
            for name, v in self.views().items():
                if name == "g":
                    v.fill_(1.0)
                elif name == "Alog":
                    v.copy_(torch.log(torch.arange(1, v.shape[1] + 1, dtype=torch.float32)).expand_as(v))
                elif name == "D":
                    v.fill_(1.0)
                elif name == "bdt":
                    dt = torch.exp(math.log(1e-3) + torch.rand(v.shape, generator=gen) * (math.log(1e-1) - math.log(1e-3)))
                    v.copy_(dt + torch.log(-torch.expm1(-dt)))
                elif name in ("convb",):
                    v.uniform_(-0.1, 0.1, generator=gen)
                else:
                    fan = v.shape[-1]
                    v.normal_(0.0, (0.1 if self.sym == "E" else 1.0 / math.sqrt(fan)), generator=gen)

    def forward(self, x):
        c, s, v = self.c, self.sym, self.views()
        B, T, d = c["batch"], c["seq"], c["d"]
        if s == "E":  # x: tokens (B', T) int64
            t = x.shape[-1]
            return v["wte"][x] + v["wpe"][:t]
        if s == "L":  # logits (B', T, V); the loss is outside (cross_entropy)
            return rmsnorm(x, v["g"], c["norm_eps"]) @ v["W"].t()
        h = rmsnorm(x, v["g"], c["norm_eps"])
        if s == "*":
            return x + self.attn(h, v)
        if s == "-":
            return x + swiglu(h @ v["W1"].t(), c["ffn"]) @ v["W2"].t()
        if s == "#":
            return x + self.moe(h, v)
        if s == "M":
            return x + self.mamba(h, v)
        raise ValueError(s)

    def attn(self, h, v):
        c = self.c
        Bq, T, d = h.shape
        H = c["n_heads"]
        hd = d // H
        qkv = h @ v["Wqkv"].t()
        q, k, vv = (qkv[..., i * d:(i + 1) * d].reshape(Bq, T, H, hd).transpose(1, 2) for i in range(3))
        sc = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
        t = torch.arange(T)
        band = t[None, :] <= t[:, None]
        if c["window"] > 0:
            band &= t[None, :] > t[:, None] - c["window"]
        P = torch.softmax(sc.masked_fill(~band, float("-inf")), dim=-1)
        o = (P @ vv).transpose(1, 2).reshape(Bq, T, d)
        return o @ v["Wo"].t()

    def moe(self, h, v):
        c = self.c
        Bq, T, d = h.shape
        E, k, fe, fs = c["n_experts"], c["top_k"], c["expert_dim"], c["shared_dim"]
        x = h.reshape(-1, d)
        N = x.shape[0]
        logit = x @ v["Wr"].t()
        # k largest logits, ties to the lower index (C scans e ascending with a strict >)
        top, pick = torch.topk(logit, k, dim=-1, sorted=True)
        gate = torch.softmax(top, dim=-1)
        prob = torch.softmax(logit, dim=-1)
        y = torch.zeros_like(x)
        counts = torch.zeros(E)
        for e in range(E):
            rows, slot = (pick == e).nonzero(as_tuple=True)
            counts[e] = rows.numel()
            if rows.numel() == 0:
                continue
            z = swiglu(x[rows] @ v[f"W1_{e}"].t(), fe) @ v[f"W2_{e}"].t()
            y = y.index_add(0, rows, gate[rows, slot].unsqueeze(-1) * z)
        if fs > 0:
            y = y + swiglu(x @ v["W1s"].t(), fs) @ v["W2s"].t()
        frac = (counts / (N * k)).detach()  # no gradient through the assignment shares
        self.aux = c["aux_coef"] * E * (frac * prob.mean(0)).sum()
        return y.reshape(Bq, T, d)

    def mamba(self, h, v):
        c = self.c
        Bq, T, d = h.shape
        Di, S, K, R = c["ssm_inner"], c["ssm_state"], c["ssm_conv"], c["ssm_dt_rank"]
        xz = h @ v["Win"].t()
        xs, z = xz[..., :Di], xz[..., Di:]
        # causal depthwise conv: xc[t] = convb + sum_k convw[:,k] xs[t-K+1+k]
        xc = F.conv1d(F.pad(xs.transpose(1, 2), (K - 1, 0)), v["convw"].unsqueeze(1), v["convb"],
                      groups=Di).transpose(1, 2)
        u = F.silu(xc)
        dbc = u @ v["Wx"].t()
        dtr, Bm, Cm = dbc[..., :R], dbc[..., R:R + S], dbc[..., R + S:]
        dt = F.softplus(dtr @ v["Wdt"].t() + v["bdt"], threshold=20.0)
        A = -torch.exp(v["Alog"])  # (Di, S)
        st = torch.zeros(Bq, Di, S)
        ys = []
        for t in range(T):
            st = torch.exp(dt[:, t, :, None] * A) * st + (dt[:, t] * u[:, t])[..., None] * Bm[:, t, None, :]
            ys.append((st * Cm[:, t, None, :]).sum(-1))
        ysv = torch.stack(ys, 1) + v["D"] * u
        return (ysv * F.silu(z)) @ v["Wout"].t()


def build_layers(pattern, c, seed=1):
    gen = torch.Generator().manual_seed(seed)
    layers = [Layer(s, c, i) for i, s in enumerate(pattern)]
    for l in layers:
        l.init_(gen)
    return layers


def ce_loss(logits, targets):
    """Mean cross-entropy over rows with target >= 0 (the C head's loss)."""
    lg = logits.reshape(-1, logits.shape[-1])
    tg = targets.reshape(-1)
    keep = tg >= 0
    return F.cross_entropy(lg[keep], tg[keep], reduction="mean")
