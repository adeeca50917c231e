/* svg.c: a plan's timeline as a standalone SVG a person can read.
 *
 * Devices are rows on a grey band (so idle time shows as grey), ops are boxes coloured by kind
 * (torch's visualizer colours: F blue, I teal, W green, B orange), a device's second (fourth,
 * ...) stage is drawn in a lighter tint so interleaved and V schedules read apart, and each box
 * carries its microbatch number when it is wide enough, plus a hover tooltip.  Below: a time
 * axis with ms ticks and a legend; above: plan name and makespan, bubble ratio and peak memory;
 * right: each device's peak memory.  Activation policies: a recompute is a dark band at the
 * start of its I or B box (it runs there), and a device whose stages offload gets a thin
 * copy-engine lane under its row with the offload (purple) and reload (pink) copies.  The canvas is a fixed 1600 px wide, so thin boxes (large
 * P x M) simply drop their labels. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/export.h"

enum { W_PX = 1600, LEFT = 86, RIGHT = 118, TOP = 64 };

static const char *const kind_fill[4] = {"#4372c4", "#1a9a9a", "#4a9e4f", "#ee8a2a"};
static const char *const kind_tint[4] = {"#8eaee0", "#6fc4c4", "#8fca8f", "#f5b877"};
static const char *const kind_text[4] = {"#ffffff", "#ffffff", "#ffffff", "#2b1a08"};
static const char *const kind_desc[4] = {"F forward", "I backward (input grad)",
                                         "W backward (weight grad)", "B backward (fused I+W)"};

static void xml_str(op_buf *b, const char *s) {
    for (; *s; s++) {
        /* U+FFFE and U+FFFF are valid UTF-8 (a plan's JSON may hold them) but no XML 1.0
         * character, escaped or not: the SVG would not parse */
        if (!strncmp(s, "\xEF\xBF\xBE", 3) || !strncmp(s, "\xEF\xBF\xBF", 3)) {
            s += 2;
            continue;
        }
        switch (*s) {
        case '&': op_buf_printf(b, "&amp;"); break;
        case '<': op_buf_printf(b, "&lt;"); break;
        case '>': op_buf_printf(b, "&gt;"); break;
        case '"': op_buf_printf(b, "&quot;"); break;
        default:
            if ((unsigned char)*s >= 0x20) op_buf_put(b, s, 1);
        }
    }
}

static void fmt_bytes(char *buf, size_t n, int64_t v) {
    double x = (double)v;
    if (x >= 1024.0 * 1024 * 1024) snprintf(buf, n, "%.2f GiB", x / (1024.0 * 1024 * 1024));
    else if (x >= 1024.0 * 1024) snprintf(buf, n, "%.1f MiB", x / (1024.0 * 1024));
    else snprintf(buf, n, "%lld B", (long long)v);
}

/* 1, 2 or 5 times a power of ten, giving about 8-12 ticks over span */
static double nice_step(double span) {
    double raw = span / 10, mag = pow(10, floor(log10(raw)));
    double m = raw / mag;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * mag;
}

int op_export_svg(const op_plan *p, op_buf *out, op_err *err) {
    int rc = op_plan_validate(p, err);
    if (!rc) rc = op_export_check_times(p, err);
    if (rc) return op_err_prefix(err, "SVG");
    int P = p->P;
    op_export_summary sum;
    op_export_summarize(p, &sum);
    double span = sum.makespan_ms > 0 ? sum.makespan_ms : 1;
    double plot_w = W_PX - LEFT - RIGHT, sx = plot_w / span;
    double rh = P <= 8 ? 40 : fmax(16, fmin(40, 640.0 / P)); /* row pitch, px */
    double bh = rh - (rh >= 24 ? 6 : 3);                     /* box height */
    double *cx = op_export_copy_times(p);
    int any_rc = 0;
    for (int s = 0; s < p->S; s++) any_rc |= op_stage_recompute_ms(p, s) > 0;
    double lane = cx ? fmax(5, bh * 0.3) : 0; /* copy-engine lane under each row */
    rh += cx ? lane + 2 : 0;
    double font = fmin(12, bh - 4);
    double plot_h = rh * P, axis_y = TOP + plot_h + 4;
    int H = (int)(axis_y + 64);
    /* chunk index of each stage on its device: 0 for the first stage a device holds, 1 ... */
    int *chunk = op_xcalloc((size_t)p->S, sizeof(int)), *seen = op_xcalloc((size_t)P, sizeof(int));
    int any_tint = 0, present[4] = {0};
    for (int s = 0; s < p->S; s++) {
        chunk[s] = seen[p->stage_dev[s]]++;
        any_tint |= chunk[s] & 1;
    }
    char b1[48], b2[48];

    op_buf b = {0};
    op_buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                      "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Helvetica, Arial, "
                      "sans-serif\">\n", W_PX, H, W_PX, H);
    op_buf_printf(&b, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", W_PX,
                  H);
    /* title */
    op_buf_printf(&b, "<text x=\"%d\" y=\"24\" font-size=\"17\" font-weight=\"bold\" "
                      "fill=\"#1d2430\">", LEFT);
    xml_str(&b, p->name);
    if (p->model[0]) {
        op_buf_printf(&b, " &#183; ");
        xml_str(&b, p->model);
    }
    op_buf_printf(&b, "<tspan font-weight=\"normal\" fill=\"#56606e\"> &#183; %d devices", P);
    op_buf tc = {0};
    if (op_export_type_counts(p, &tc)) { /* a mixed cluster: "(4 h100-80gb + 4 a100-80gb)" */
        op_buf_printf(&b, " (");
        xml_str(&b, tc.data);
        op_buf_printf(&b, ")");
    }
    op_buf_free(&tc);
    op_buf_printf(&b, ", %d stages, %d microbatches</tspan></text>\n", p->S, p->M);
    fmt_bytes(b1, sizeof b1, sum.peak_bytes_max);
    op_buf_printf(&b, "<text x=\"%d\" y=\"46\" font-size=\"14\" fill=\"#1d2430\">makespan "
                      "<tspan font-weight=\"bold\">%.2f ms</tspan> &#183; bubble <tspan "
                      "font-weight=\"bold\">%.1f%%</tspan> &#183; peak memory <tspan "
                      "font-weight=\"bold\">%s</tspan> (device %d)",
                  LEFT, sum.makespan_ms, 100 * sum.bubble_ratio, b1, sum.peak_dev);
    if (p->pred.valid && p->pred.lower_bound_ms > 0)
        op_buf_printf(&b, " &#183; lower bound %.2f ms", p->pred.lower_bound_ms);
    op_buf_printf(&b, "</text>\n");
    op_buf_printf(&b, "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#56606e\" "
                      "text-anchor=\"middle\">peak memory</text>\n",
                  W_PX - RIGHT / 2, TOP - 6);

    /* rows, grid, boxes */
    double step = nice_step(span);
    op_buf_printf(&b, "<g class=\"rows\">\n");
    for (int d = 0; d < P; d++) {
        double y = TOP + d * rh;
        op_buf_printf(&b, "<rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                          "fill=\"#e9ecf1\"/>\n", LEFT, y, plot_w, bh);
        const char *ty = op_export_dev_type(p, d);
        if (!ty)
            op_buf_printf(&b, "<text x=\"%d\" y=\"%.1f\" font-size=\"%.0f\" text-anchor=\"end\" "
                              "dominant-baseline=\"central\" fill=\"#1d2430\">device %d</text>\n",
                          LEFT - 8, y + bh / 2, fmin(13, font + 1), d);
        else { /* a mixed plan: the GPU type under the device (beside it on thin rows) */
            int two = bh >= 22;
            char dy[48];
            snprintf(dy, sizeof dy, " x=\"%d\" dy=\"1.15em\"", LEFT - 8);
            double fs = two ? fmin(12, bh / 2 - 1) : fmin(10, bh - 3);
            op_buf_printf(&b, "<text class=\"devtype\" x=\"%d\" y=\"%.1f\" font-size=\"%.0f\" "
                              "text-anchor=\"end\" dominant-baseline=\"central\" fill=\"#1d2430\">"
                              "%s%d%s<tspan font-size=\"%.0f\" fill=\"#56606e\"%s>",
                          LEFT - 8, two ? y + bh / 2 - fs * 0.55 : y + bh / 2, fs,
                          two ? "device " : "d", d, two ? "" : " ", two ? fs - 1 : fs,
                          two ? dy : "");
            char t14[15]; /* the margin holds ~14 characters */
            /* cut before a character the 14 bytes split: half of it is no UTF-8, and the
             * SVG would not parse */
            op_copy_name(t14, sizeof t14, ty);
            xml_str(&b, t14);
            op_buf_printf(&b, "</tspan></text>\n");
        }
        int64_t pk = op_export_peak_bytes(p, d);
        fmt_bytes(b2, sizeof b2, pk);
        op_buf_printf(&b, "<text x=\"%d\" y=\"%.1f\" font-size=\"%.0f\" text-anchor=\"middle\" "
                          "dominant-baseline=\"central\" fill=\"#1d2430\"%s>%s</text>\n",
                      W_PX - RIGHT / 2, y + bh / 2, fmin(12, font + 1),
                      d == sum.peak_dev ? " font-weight=\"bold\"" : "", b2);
    }
    op_buf_printf(&b, "</g>\n<g class=\"grid\" stroke=\"#ffffff\" stroke-width=\"1\">\n");
    for (double t = step; t < span - 1e-9 * span; t += step)
        op_buf_printf(&b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\"/>\n", LEFT + t * sx,
                      TOP, LEFT + t * sx, TOP + plot_h);
    op_buf_printf(&b, "</g>\n<g class=\"ops\">\n");
    /* one width rule for all labels (digits of the largest mb), so a row is either labelled
     * throughout or not at all instead of mb 0-9 labelled and 10+ bare */
    int digits = p->M > 100 ? 3 : p->M > 10 ? 2 : 1;
    for (int d = 0; d < P; d++) {
        double y = TOP + d * rh;
        for (int i = 0; i < p->n_ops[d]; i++) {
            const op_op *o = &p->ops[d][i];
            int k = o->kind;
            present[k] = 1;
            double x = LEFT + o->start * sx, w = (o->end - o->start) * sx;
            if (w < 0.6) w = 0.6; /* stays visible */
            const char *fill = chunk[o->stage] & 1 ? kind_tint[k] : kind_fill[k];
            op_buf_printf(&b, "<rect class=\"op %s\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                              "height=\"%.1f\" fill=\"%s\"%s><title>%s s%d mb%d: %.3f-%.3f ms, "
                              "layers [%d,%d), device %d</title></rect>\n",
                          op_kind_name((op_kind)k), x, y, w, bh, fill,
                          w >= 4 ? " stroke=\"#ffffff\" stroke-width=\"0.6\"" : "",
                          op_kind_name((op_kind)k), o->stage, o->mb, o->start, o->end,
                          p->stage_first[o->stage], p->stage_first[o->stage + 1], d);
            if (w >= digits * font * 0.62 + 4 && font >= 7)
                op_buf_printf(&b, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"%.0f\" "
                                  "text-anchor=\"middle\" dominant-baseline=\"central\" "
                                  "fill=\"%s\">%d</text>\n",
                              x + w / 2, y + bh / 2, font,
                              chunk[o->stage] & 1 && k != OP_B ? "#10202a" : kind_text[k], o->mb);
        }
    }
    op_buf_printf(&b, "</g>\n");
    if (any_rc) { /* recompute: the first recompute_ms of each I|B of a policy stage */
        op_buf_printf(&b, "<g class=\"recompute\">\n");
        for (int d = 0; d < P; d++)
            for (int i = 0; i < p->n_ops[d]; i++) {
                const op_op *o = &p->ops[d][i];
                double r = o->kind == OP_I || o->kind == OP_B ? op_stage_recompute_ms(p, o->stage) : 0;
                if (!(r > 0)) continue;
                if (r > o->end - o->start) r = o->end - o->start;
                op_buf_printf(&b, "<rect class=\"op recompute\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                                  "height=\"%.1f\" fill=\"#5b3a29\" fill-opacity=\"0.75\"><title>"
                                  "recompute (%s) s%d mb%d: %.3f ms</title></rect>\n",
                              LEFT + o->start * sx, TOP + d * rh, fmax(0.6, r * sx), bh,
                              op_act_policy_name(p->stage_act[o->stage]), o->stage, o->mb, r);
            }
        op_buf_printf(&b, "</g>\n");
    }
    if (cx) { /* copy engines */
        op_buf_printf(&b, "<g class=\"copies\">\n");
        for (int s = 0; s < p->S; s++) {
            if (p->stage_act[s] != OP_ACT_OFFLOAD) continue;
            double y = TOP + p->stage_dev[s] * rh + bh + 1;
            for (int m = 0; m < p->M; m++) {
                const double *x = &cx[((size_t)s * p->M + m) * 4];
                for (int k = 0; k < 2; k++) {
                    if (x[2 * k] < 0) continue;
                    double w = fmax(0.6, (x[2 * k + 1] - x[2 * k]) * sx);
                    op_buf_printf(&b, "<rect class=\"copy %s\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                                      "height=\"%.1f\" fill=\"%s\"%s><title>%s s%d mb%d: %.3f-%.3f ms"
                                      "</title></rect>\n",
                                  k ? "reload" : "offload", LEFT + x[2 * k] * sx, y, w, lane,
                                  k ? "#c05a9a" : "#7b4fb0",
                                  w >= 4 ? " stroke=\"#ffffff\" stroke-width=\"0.6\"" : "",
                                  k ? "reload" : "offload", s, m, x[2 * k], x[2 * k + 1]);
                }
            }
        }
        op_buf_printf(&b, "</g>\n");
    }

    /* time axis */
    op_buf_printf(&b, "<g class=\"axis\" font-size=\"11\" fill=\"#56606e\">\n");
    op_buf_printf(&b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#56606e\"/>\n",
                  LEFT, axis_y, LEFT + plot_w, axis_y);
    for (double t = 0; t <= span * (1 + 1e-9); t += step) {
        double x = LEFT + t * sx;
        op_buf_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                          "stroke=\"#56606e\"/>\n", x, axis_y, x, axis_y + 5);
        op_buf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", x,
                      axis_y + 17, t);
    }
    op_buf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\">ms</text>\n</g>\n", LEFT + plot_w + 16,
                  axis_y + 17);

    /* legend */
    double lx = LEFT, ly = axis_y + 34;
    op_buf_printf(&b, "<g class=\"legend\" font-size=\"12\" fill=\"#1d2430\">\n");
    for (int k = 0; k < 4; k++) {
        if (!present[k]) continue;
        op_buf_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"%s\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" dominant-baseline=\"central\">%s</text>\n",
                      lx, ly, kind_fill[k], lx + 19, ly + 7, kind_desc[k]);
        lx += 19 + 7.2 * (double)strlen(kind_desc[k]) + 22;
    }
    if (any_tint) {
        int k0 = 0, k1;
        while (!present[k0]) k0++;
        k1 = k0 + 1;
        while (k1 < 4 && !present[k1]) k1++;
        if (k1 == 4) k1 = k0;
        op_buf_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"7\" height=\"14\" fill=\"%s\"/>"
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"7\" height=\"14\" fill=\"%s\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" dominant-baseline=\"central\">lighter: a "
                          "device's 2nd (4th, ...) stage</text>\n",
                      lx, ly, kind_tint[k0], lx + 7, ly, kind_tint[k1], lx + 19, ly + 7);
        lx += 19 + 7.2 * 34 + 22;
    }
    const char *ext_fill[3] = {"#5b3a29", "#7b4fb0", "#c05a9a"};
    const char *ext_desc[3] = {"recompute (start of I or B)", "offload to host", "reload"};
    for (int k = 0; k < 3; k++) {
        if (k == 0 ? !any_rc : !cx) continue;
        op_buf_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"%s\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" dominant-baseline=\"central\">%s</text>\n",
                      lx, ly, ext_fill[k], lx + 19, ly + 7, ext_desc[k]);
        lx += 19 + 7.2 * (double)strlen(ext_desc[k]) + 22;
    }
    op_buf_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"#e9ecf1\"/>"
                      "<text x=\"%.1f\" y=\"%.1f\" dominant-baseline=\"central\">idle</text>\n"
                      "<text x=\"%.1f\" y=\"%.1f\" dominant-baseline=\"central\" fill=\"#56606e\">"
                      "box label = microbatch</text>\n</g>\n</svg>\n",
                  lx, ly, lx + 19, ly + 7, lx + 70, ly + 7);
    free(chunk);
    free(seen);
    free(cx);
    op_buf_put(out, b.data, b.len);
    op_buf_free(&b);
    return OP_OK;
}
