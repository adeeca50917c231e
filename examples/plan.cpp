// plan.cpp: OctoPipe from C++.  The headers are C with extern "C"; small RAII holders free
// what the library allocates.  Same job as plan.c: load a preset, simulate 1F1B, tune, print.
//
//   c++ plan.cpp $(pkg-config --cflags --libs octopipe) -o plan_cpp
//   ./plan_cpp [MODEL [DEVICES [MICROBATCHES]]]      (default: nemotron-h-8b 4 8)
#include <octopipe/octopipe.h>

#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <string>

namespace {

void check(int rc, const op_err &err, const std::string &what) {
    if (rc != OP_OK) throw std::runtime_error(what + ": " + err.msg);
}

struct Problem {
    op_problem_built b{};
    Problem(const char *model, int P, int M) {
        op_err err{};
        check(op_problem_build(&b, model, "h100-80gb", P, M, nullptr, &err), err, model);
    }
    ~Problem() { op_problem_built_free(&b); }
    Problem(const Problem &) = delete; // b.pr points into b
    Problem &operator=(const Problem &) = delete;
};

struct Plan {
    op_plan p{};
    bool live = false;
    ~Plan() { if (live) op_plan_free(&p); }
};

void show(const op_plan &p) {
    char line[160];
    std::snprintf(line, sizeof line, "%-9s stages %3d  makespan_ms %.6f  bubble %.4f  peak_GiB %.2f",
                  p.name, p.S, p.pred.makespan_ms, p.pred.bubble_ratio,
                  p.pred.peak_bytes_max / 1073741824.0);
    std::cout << line << '\n';
}

} // namespace

int main(int argc, char **argv) try {
    const char *model = argc > 1 ? argv[1] : "nemotron-h-8b";
    int P = argc > 2 ? std::stoi(argv[2]) : 4, M = argc > 3 ? std::stoi(argv[3]) : 8;
    Problem pr(model, P, M);
    std::cout << "octopipe " << op_version() << " (C++): " << pr.b.model.name << ", "
              << pr.b.model.n_layers << " layers on " << P << " x " << pr.b.dev.name << ", " << M
              << " microbatches\n";
    op_err err{};
    Plan base, tuned;
    check(op_sched_build("1f1b", &pr.b.pr, &base.p, &err), err, "1f1b");
    base.live = true;
    check(op_sim_replay(&base.p, nullptr, &err), err, "simulate 1f1b");
    show(base.p);
    op_tune_opts o;
    op_tune_opts_default(&o);
    check(op_tune(&pr.b.pr, &o, &tuned.p, &err), err, "tune");
    tuned.live = true;
    show(tuned.p);
    std::printf("speedup %.3fx\n", base.p.pred.makespan_ms / tuned.p.pred.makespan_ms);
    return 0;
} catch (const std::exception &e) {
    std::cerr << "plan_cpp: " << e.what() << '\n';
    return 2;
}
