/* tune_memo.c: a bounded, 2-way set-associative memo from candidates to engine results.
 *
 * Key: every field of the candidate tn_eval reads (S, split, fmode, ffirst, imode, look, memres,
 * first[0..S], dev, pol [S], cap, wlim [P]), compared in full (the hash only picks the set).
 * Value: the tn_res of a complete run, or only the fact that a run gave up, plus xmax (see
 * tune_memo.h).  Each set keeps its most recently used entry in way 0.  Sized to at most
 * 1024 sets and 8 MiB: zeroed pages the search never reaches cost nothing.
 *
 * Entry layout (esz bytes, 8-aligned): hdr, then busy, first_start, last_end [P] doubles,
 * peak [P] int64, max_inflight [P] int, key [kmax] int32. */
#include <stdlib.h>
#include <string.h>

#include "tune/tune_int.h"
#include "tune/tune_memo.h"

typedef struct {
    uint64_t h; /* 0 = empty */
    int32_t klen, complete;
    double xmax, mk;
    int64_t peak_max;
    int64_t fits;
} memo_hdr;

struct tn_memo {
    int P, kmax;
    size_t nsets, esz;
    unsigned char *ent;      /* [2 * nsets * esz] */
    unsigned char *tmp;      /* [esz] for swapping ways */
    int32_t *key;            /* [kmax] key of the last miss */
    int klen;
    uint64_t h;
    size_t set;              /* its set */
    double lim, ovh;         /* pb's, when the memo was filled */
    const double *dev_lim;
};

static size_t off_first(int P) { return sizeof(memo_hdr) + sizeof(double) * (size_t)P; }
static size_t off_last(int P) { return sizeof(memo_hdr) + 2 * sizeof(double) * (size_t)P; }
static size_t off_peak(int P) { return sizeof(memo_hdr) + 3 * sizeof(double) * (size_t)P; }
static size_t off_inf(int P) { return off_peak(P) + sizeof(int64_t) * (size_t)P; }
static size_t off_key(int P) { return (off_inf(P) + sizeof(int) * (size_t)P + 7) / 8 * 8; }

tn_memo *tn_memo_new(const tn_prob *pb) {
    tn_memo *m = op_xcalloc(1, sizeof *m);
    m->P = pb->P;
    m->kmax = 8 + 3 * pb->L + 2 * pb->P;
    m->esz = (off_key(pb->P) + sizeof(int32_t) * (size_t)m->kmax + 7) / 8 * 8;
    for (m->nsets = 1024; m->nsets > 16 && 2 * m->nsets * m->esz > (size_t)8 << 20; m->nsets /= 2) {}
    m->ent = op_xcalloc(2 * m->nsets, m->esz);
    m->tmp = op_xmalloc(m->esz);
    m->key = op_xmalloc(sizeof(int32_t) * (size_t)m->kmax);
    m->lim = pb->mem_limit;
    m->ovh = pb->ovh;
    m->dev_lim = pb->dev_lim;
    return m;
}

void tn_memo_free(tn_memo *m) {
    if (!m) return;
    free(m->ent);
    free(m->tmp);
    free(m->key);
    free(m);
}

static unsigned char *way(tn_memo *m, size_t set, int w) {
    return m->ent + (2 * set + (size_t)w) * m->esz;
}

static int key_of(const tn_cand *c, int P, int32_t *k) {
    int n = 0;
    k[n++] = c->S, k[n++] = c->split, k[n++] = c->fmode, k[n++] = c->ffirst;
    k[n++] = c->imode, k[n++] = c->look, k[n++] = c->memres;
    for (int s = 0; s <= c->S; s++) k[n++] = c->first[s];
    for (int s = 0; s < c->S; s++) k[n++] = c->dev[s];
    for (int s = 0; s < c->S; s++) k[n++] = c->pol[s];
    for (int d = 0; d < P; d++) k[n++] = c->cap[d];
    for (int d = 0; d < P; d++) k[n++] = c->wlim[d];
    return n;
}

static uint64_t hash_of(const int32_t *k, int n) { /* FNV-1a over the words; never 0 */
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) h = (h ^ (uint32_t)k[i]) * 1099511628211ull;
    return h ? h : 1;
}

int tn_memo_get(tn_memo *m, const tn_prob *pb, const tn_cand *c, double cutoff, tn_res *r,
                double *mk) {
    if (pb->mem_limit != m->lim || pb->ovh != m->ovh || pb->dev_lim != m->dev_lim) {
        memset(m->ent, 0, 2 * m->nsets * m->esz); /* another problem: forget everything */
        m->lim = pb->mem_limit, m->ovh = pb->ovh, m->dev_lim = pb->dev_lim;
    }
    OP_ASSERT(c->S >= 1 && 7 + 3 * c->S + 2 * m->P <= m->kmax, "tune memo: %d stages", c->S);
    m->klen = key_of(c, m->P, m->key);
    m->h = hash_of(m->key, m->klen);
    m->set = (size_t)m->h & (m->nsets - 1);
    for (int w = 0; w < 2; w++) {
        unsigned char *e = way(m, m->set, w);
        memo_hdr *hd = (memo_hdr *)e;
        if (hd->h != m->h || hd->klen != m->klen ||
            memcmp(e + off_key(m->P), m->key, sizeof(int32_t) * (size_t)m->klen))
            continue;
        int gives_up = cutoff > 0 && hd->xmax > cutoff * (1 + 1e-12);
        if (!hd->complete && !gives_up) return 0; /* a lower cutoff gave up: run it */
        if (w == 1) { /* most recent first */
            memcpy(m->tmp, e, m->esz);
            memcpy(e, way(m, m->set, 0), m->esz);
            e = way(m, m->set, 0);
            memcpy(e, m->tmp, m->esz);
            hd = (memo_hdr *)e;
        }
        if (gives_up) {
            r->makespan = *mk = -2;
            return 1;
        }
        size_t P = (size_t)m->P;
        r->makespan = *mk = hd->mk;
        r->fits = (int)hd->fits;
        r->peak_max = hd->peak_max;
        memcpy(r->busy, e + sizeof(memo_hdr), sizeof(double) * P);
        memcpy(r->first_start, e + off_first(m->P), sizeof(double) * P);
        memcpy(r->last_end, e + off_last(m->P), sizeof(double) * P);
        memcpy(r->peak, e + off_peak(m->P), sizeof(int64_t) * P);
        memcpy(r->max_inflight, e + off_inf(m->P), sizeof(int) * P);
        return 1;
    }
    return 0;
}

void tn_memo_put(tn_memo *m, const tn_res *r, int complete, double xmax) {
    /* the key's own entry (a run that gave up) is replaced in place; else way 1 goes */
    int w = 1;
    for (int i = 0; i < 2; i++) {
        memo_hdr *hd = (memo_hdr *)way(m, m->set, i);
        if (hd->h == m->h && hd->klen == m->klen &&
            !memcmp(way(m, m->set, i) + off_key(m->P), m->key, sizeof(int32_t) * (size_t)m->klen))
            w = i;
    }
    if (w == 1) memcpy(way(m, m->set, 1), way(m, m->set, 0), m->esz);
    unsigned char *e = way(m, m->set, 0);
    memo_hdr *hd = (memo_hdr *)e;
    size_t P = (size_t)m->P;
    hd->h = m->h;
    hd->klen = m->klen;
    hd->complete = complete;
    hd->xmax = xmax;
    memcpy(e + off_key(m->P), m->key, sizeof(int32_t) * (size_t)m->klen);
    if (!complete) return;
    hd->mk = r->makespan;
    hd->fits = r->fits;
    hd->peak_max = r->peak_max;
    memcpy(e + sizeof(memo_hdr), r->busy, sizeof(double) * P);
    memcpy(e + off_first(m->P), r->first_start, sizeof(double) * P);
    memcpy(e + off_last(m->P), r->last_end, sizeof(double) * P);
    memcpy(e + off_peak(m->P), r->peak, sizeof(int64_t) * P);
    memcpy(e + off_inf(m->P), r->max_inflight, sizeof(int) * P);
}
