/* fuzz_util.h: what every fuzz target needs: the input as a NUL-terminated string. */
#ifndef OCTOPIPE_FUZZ_UTIL_H
#define OCTOPIPE_FUZZ_UTIL_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline char *fuzz_cstr(const uint8_t *data, size_t size) {
    char *txt = malloc(size + 1);
    if (!txt) abort();
    memcpy(txt, data, size);
    txt[size] = 0;
    return txt;
}
#endif
