/* mem.c: per-microbatch activation memory (op_nn_mem, nn.h): bump allocation in blocks that
 * come from and go back to a pool, so steady-state training does no page faults. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "octopipe/nn.h"

struct op_nn_block {
    op_nn_block *next;
    size_t cap, used;
    void *away; /* offload: where the contents are while the pages are given back */
    _Alignas(16) unsigned char mem[];
};

enum { BLOCK_MIN = 256 << 10 };

/* Smallest pooled block that holds n bytes, unlinked; NULL if none. */
static op_nn_block *take(op_nn_block **pool, size_t n) {
    op_nn_block **best = NULL;
    for (op_nn_block **b = pool; *b; b = &(*b)->next)
        if ((*b)->cap >= n && (!best || (*b)->cap < (*best)->cap)) best = b;
    if (!best) return NULL;
    op_nn_block *r = *best;
    *best = r->next;
    return r;
}

void *op_nn_mem_alloc_raw(op_nn_mem *m, size_t n) {
    n = (n + 15) & ~(size_t)15;
    op_nn_block *b = m->head;
    if (!b || b->cap - b->used < n) {
        b = m->pool ? take(m->pool, n) : NULL;
        if (!b) {
            size_t cap = n > BLOCK_MIN ? n : BLOCK_MIN;
            b = op_xmalloc(sizeof *b + cap);
            b->cap = cap;
        }
        b->used = 0;
        b->away = NULL;
        b->next = m->head;
        m->head = b;
    }
    void *p = b->mem + b->used;
    b->used += n;
    m->used_bytes += n;
    return p;
}

void *op_nn_mem_alloc(op_nn_mem *m, size_t n) {
    void *p = op_nn_mem_alloc_raw(m, n);
    memset(p, 0, n); /* kernels accumulate (+=) into fresh buffers */
    return p;
}

void op_nn_mem_release(op_nn_mem *m) {
    op_nn_block *b = m->head;
    while (b) {
        op_nn_block *next = b->next;
        if (m->pool) {
            b->next = *m->pool;
            *m->pool = b;
        } else {
            free(b);
        }
        b = next;
    }
    m->head = NULL;
    m->used_bytes = 0;
}

void op_nn_pool_free(op_nn_block **pool) {
    while (*pool) {
        op_nn_block *next = (*pool)->next;
        free(*pool);
        *pool = next;
    }
}

/* Gives the whole pages of [p, p+n) back to the OS (they read as zeros until written) and
 * poisons the partial pages at the ends, so a reload that forgot something cannot pass. */
static void discard(unsigned char *p, size_t n) {
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p, e = a + n;
    uintptr_t lo = (a + pg - 1) & ~(pg - 1), hi = e & ~(pg - 1);
    if (lo >= hi) {
        memset(p, 0xff, n);
        return;
    }
    memset(p, 0xff, lo - a);
    memset((void *)hi, 0xff, e - hi);
    if (madvise((void *)lo, hi - lo, MADV_DONTNEED)) memset((void *)lo, 0xff, hi - lo);
}

size_t op_nn_mem_offload(op_nn_mem *dev, op_nn_mem *host) {
    for (op_nn_block *b = dev->head; b; b = b->next) {
        OP_ASSERT(!b->away, "block offloaded twice");
        if (!b->used) continue;
        b->away = op_nn_mem_alloc_raw(host, b->used);
        memcpy(b->away, b->mem, b->used);
        discard(b->mem, b->used);
    }
    return dev->used_bytes;
}

size_t op_nn_mem_reload(op_nn_mem *dev, op_nn_mem *host) {
    for (op_nn_block *b = dev->head; b; b = b->next) {
        if (!b->away) continue;
        memcpy(b->mem, b->away, b->used);
        b->away = NULL;
    }
    (void)host; /* the caller releases it once every arena it holds is back */
    return dev->used_bytes;
}
