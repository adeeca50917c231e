"""octopipe_torch: run an OctoPipe plan in torch.distributed.pipelining.

An OctoPipe plan (octopipe.plan/1 JSON) holds the partition (stage s = layers
[first, last)), the placement (stage -> rank, any pattern: loop, V, sequential or irregular,
any number of stages per rank) and each rank's order of F / I / W / B actions.  torch's
_PipelineScheduleRuntime runs exactly that: it reads the per-rank action lists as a CSV and
infers the stage -> rank map from the rows.  This module

  - turns the plan into those rows (compute_only; or reads `octopipe export --torch-csv`),
  - checks them with torch's own loader and dry run, without processes (check_plan),
  - builds this rank's PipelineStage objects from your layers (build_stages), with each
    stage's activation policy from the plan: "full" keeps only the stage's input and re-runs
    its forward once, when the backward first needs it (before I), "offload"
    keeps the stage's saved tensors in host memory (torch.autograd.graph.save_on_cpu);
    "selective" (the attention core alone) needs the layers' own help and is left to them,
  - loads the actions and runs one training step, recording the order in which the stages
    really executed F / I / W / B (run_step).

No dependency beyond torch.  Tested with torch 2.15 (private runtime API: _PipelineScheduleRuntime,
_load_csv); see docs/torch.md.
"""
import csv
import io
import json
import os
import tempfile
import warnings

import torch
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as _sch

__all__ = ["load_plan", "plan_rows", "check_plan", "build_stages", "make_schedule", "run_step",
           "Plan"]


POLICIES = ("keep", "selective", "full", "offload")


class Plan:
    """The parts of a plan the runtime needs (names as in the plan file)."""

    def __init__(self, js):
        if js.get("format") != "octopipe.plan/1":
            raise ValueError(f"not an octopipe.plan/1 file (format {js.get('format')!r})")
        self.P = int(js["devices"])
        self.M = int(js["microbatches"])
        self.stages = [tuple(s) for s in js["stages"]]
        self.S = len(self.stages)
        self.layer_kinds = [l.get("kind", "?") for l in js["layers"]]
        self.stage_to_rank = {}
        for d, sts in enumerate(js["placement"]):
            for s in sts:
                self.stage_to_rank[int(s)] = d
        self.schedule = [[(o["op"], int(o["stage"]), int(o["mb"])) for o in row] for row in js["schedule"]]
        # per stage: keep, selective, full or offload (files without the key keep everything)
        self.activation = [str(a) for a in js.get("activation", ["keep"] * self.S)]
        if len(self.activation) != self.S or any(a not in POLICIES for a in self.activation):
            raise ValueError(f"activation: expected {self.S} of {', '.join(POLICIES)}")

    def stages_of(self, rank):
        return sorted(s for s, r in self.stage_to_rank.items() if r == rank)


def load_plan(path):
    with open(path) as f:
        return Plan(json.load(f))


def plan_rows(plan):
    """compute_only rows: row d = rank d's actions in plan order, cells like 2F0 1I3 1W3 0B7."""
    return [[f"{s}{op}{m}" for op, s, m in row] for row in plan.schedule]


def _write_csv(rows, path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        for r in rows:
            w.writerow(r)


_BOOKKEEPING = (_sch.UNSHARD, _sch.RESHARD, _sch.REDUCE_GRAD, _sch.WAIT_REDUCE_GRAD)


class _Loader(_sch._PipelineScheduleRuntime):
    """torch's runtime without stages or process group: only what _load_csv and _simulate read
    (ranks, stages, microbatches and the lowering settings, at the runtime's defaults)."""

    def __init__(self, P, S, M):  # noqa: D401 - deliberately skips the parent's __init__
        self.pp_group_size, self._num_stages, self._n_microbatches = P, S, M
        self._stages = []
        self.pipeline_order = {}
        self.pipeline_order_with_comms = None
        self._defer_pp_recv = False
        self._max_active_stages = 3
        self._unshard_lookahead = "full"
        self._defer_reduce_grad_wait = False
        self._max_outstanding_sends = None


def check_plan(P, S, M, csv_path, fmt="compute_only"):
    """Loads a CSV the way torch's runtime does (validation, stage -> rank inference, lowering
    to compute_comms) and runs torch's dry run of the lowered lists.  Raises what torch raises.
    Returns (stage_to_rank dict, lowered rows as lists of strings)."""
    ld = _Loader(P, S, M)
    ld._load_csv(csv_path, format=fmt)
    if fmt == "compute_comms":  # _load_csv does not infer the map from a lowered file
        ld.stage_index_to_group_rank = _sch._validate_schedule(
            {r: [a for a in acts if a.is_compute_op] for r, acts in ld.pipeline_order_with_comms.items()},
            P, S, M)
    # torch's dry run knows compute, send/recv and send waits; the FSDP and reduction
    # bookkeeping actions have no data dependency and are left out of it
    keep = {r: [a for a in acts if a.computation_type not in _BOOKKEEPING]
            for r, acts in ld.pipeline_order_with_comms.items()}
    m = ld.stage_index_to_group_rank
    _sch._simulate_comms_compute(keep, lambda s: m[s], S)
    rows = [[str(a) for a in ld.pipeline_order_with_comms[r]] for r in range(P)]
    return dict(ld.stage_index_to_group_rank), rows


def _run(layers, x):
    for l in layers:
        x = l(x)
    return x


class _StageModule(nn.Module):
    """Layers [first, last) of the model as one stage; `layers` are registered, not copied.
    policy "full": autograd keeps only the stage input and the layers re-run once, when the
    backward first needs their tensors (_RecomputeOnce);
    "offload": autograd's saved tensors go to host memory and come back when needed."""

    def __init__(self, layers, policy="keep"):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.policy = policy

    def forward(self, x):
        return _apply_policy(self.policy, lambda y: _run(self.layers, y), x)


class _PolicyModule(nn.Module):
    """A stage module of the caller's with the plan's policy around its forward."""

    def __init__(self, inner, policy):
        super().__init__()
        self.inner, self.policy = inner, policy

    def forward(self, x):
        return _apply_policy(self.policy, self.inner, x)


class _RecomputeOnce:
    """Full recomputation of one microbatch's stage forward, run once.

    torch.utils.checkpoint recomputes in every backward call that needs the tensors, and a
    split backward makes several: the input gradient (I), then the weight gradients (W, one
    autograd call per parameter group in torch's pipelining).  Here the forward keeps only the
    stage input; the first unpack re-runs the forward and keeps what it saves until the graph
    is freed after W, as the plan's "full" does (one re-run before I).  The re-run draws the
    random numbers the forward drew (dropout masks): the RNG state at the forward is restored
    for it, and the caller's stream is left as it was."""

    def __init__(self, fn, x):
        self.fn, self.n, self.saved = fn, 0, None
        self.x = x.detach()
        self.x_grad = x.requires_grad  # the re-run saves what the first saved only if equal
        self.cpu_rng = torch.get_rng_state()
        self.dev = x.device if x.is_cuda else None
        self.dev_rng = torch.cuda.get_rng_state(x.device) if self.dev is not None else None

    def pack(self, t):
        self.n += 1
        return self.n - 1

    def unpack(self, k):
        if self.saved is None:
            saved = []
            x = self.x.requires_grad_(self.x_grad) if self.x_grad else self.x
            devs = [self.dev] if self.dev is not None else []
            with torch.random.fork_rng(devices=devs), torch.enable_grad(), \
                    torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.detach()),
                                                             lambda t: t):
                torch.set_rng_state(self.cpu_rng)
                if self.dev is not None:
                    torch.cuda.set_rng_state(self.dev_rng, self.dev)
                self.fn(x)
            if len(saved) != self.n:
                raise RuntimeError(f"recomputation saved {len(saved)} tensors, the forward {self.n}: "
                                   "the stage's forward is not deterministic in what it saves")
            self.saved, self.x = saved, None
        return self.saved[k]


def _apply_policy(policy, fn, x):
    if policy == "full" and torch.is_grad_enabled():
        r = _RecomputeOnce(fn, x)
        with torch.autograd.graph.saved_tensors_hooks(r.pack, r.unpack):
            return fn(x)
    if policy == "offload":
        with torch.autograd.graph.save_on_cpu(pin_memory=torch.cuda.is_available()):
            return fn(x)
    return fn(x)


def build_stages(plan, rank, layers, device, group=None):
    """This rank's PipelineStage objects, one per stage the plan places here.  `layers`: one
    module per plan layer (model order), or a callable (stage, first, last) -> module.  Stage
    numbering, num_stages and the stage -> rank map are the plan's; each stage runs with the
    plan's activation policy (full, offload; keep and selective run as given, selective with a
    warning: the plan counted the attention core's output as dropped)."""
    out = []
    sel = [s for s in plan.stages_of(rank) if plan.activation[s] == "selective"]
    if sel:  # the plan's memory assumed the attention core dropped: say that it is not here
        warnings.warn(f"octopipe_torch: stage(s) {', '.join(map(str, sel))} of rank {rank} have "
                      "the selective policy (recompute the attention core), which needs the "
                      "layers' own help; they run as keep and hold the attention output the plan "
                      "counted as dropped", stacklevel=2)
    for s in plan.stages_of(rank):
        first, last = plan.stages[s]
        pol = plan.activation[s]
        if callable(layers):
            mod = layers(s, first, last)
            mod = _PolicyModule(mod, pol) if pol in ("full", "offload") else mod
        else:
            mod = _StageModule(layers[first:last], pol)
        st = PipelineStage(mod.to(device), s, plan.S, device, group=group)
        st.stage_index_to_group_rank = dict(plan.stage_to_rank)
        out.append(st)
    return out


def make_schedule(plan, stages, loss_fn, csv_path=None, fmt="compute_only"):
    """A _PipelineScheduleRuntime over `stages` with the plan's actions loaded (from csv_path,
    e.g. `octopipe export --torch-csv` / `--torch-comms-csv` output, or made from the plan)."""
    sched = _sch._PipelineScheduleRuntime(stages, plan.M, loss_fn=loss_fn, scale_grads=True)
    tmp = None
    if csv_path is None:
        fd, tmp = tempfile.mkstemp(suffix=".csv")
        os.close(fd)
        _write_csv(plan_rows(plan), tmp)
        csv_path, fmt = tmp, "compute_only"
    try:
        sched._load_csv(csv_path, format=fmt)
        if fmt == "compute_comms":  # the lowered file does not set the map: the plan's
            sched.stage_index_to_group_rank = dict(plan.stage_to_rank)
            for st in stages:
                st.stage_index_to_group_rank = dict(plan.stage_to_rank)
    finally:
        if tmp:
            os.unlink(tmp)
    return sched


def _record(stages, log):
    """Wraps each stage's compute entry points to append (op, stage, mb) as they run."""
    for st in stages:
        s = st.stage_index

        def fwd(mb, *a, _f=st.forward_one_chunk, _s=s, **k):
            log.append(("F", _s, mb))
            return _f(mb, *a, **k)

        def bwd(mb, *a, _f=st.backward_one_chunk, _s=s, **k):
            full = k.get("full_backward", a[1] if len(a) > 1 else True)
            log.append(("B" if full else "I", _s, mb))
            return _f(mb, *a, **k)

        def wgt(mb, *a, _f=st.backward_weight_one_chunk, _s=s, **k):
            log.append(("W", _s, mb))
            return _f(mb, *a, **k)

        st.forward_one_chunk, st.backward_one_chunk, st.backward_weight_one_chunk = fwd, bwd, wgt


def run_step(plan, rank, stages, loss_fn, inputs=None, targets=None, csv_path=None,
             fmt="compute_only"):
    """One training step of the plan on this rank: loads the actions, runs them through torch's
    schedule runtime (inputs on the rank holding stage 0, targets on the one holding the last
    stage; full batch, split into plan.M microbatches).  Returns (losses per microbatch on the
    last stage's rank else [], executed [(op, stage, mb)] in order)."""
    sched = make_schedule(plan, stages, loss_fn, csv_path, fmt)
    log = []
    _record(stages, log)
    losses = []
    has_first = any(st.is_first for st in stages)
    has_last = any(st.is_last for st in stages)
    args = (inputs,) if has_first else ()
    sched.step(*args, target=targets if has_last else None, losses=losses if has_last else None)
    return [float(l.detach()) for l in losses], log
