/* version.h: the library's version, at compile time (the macros) and at run time
 * (op_version(), the version of the liboctopipe actually linked).  The Makefile reads the
 * three numbers below for the shared library's name (liboctopipe.so.MAJOR.MINOR.PATCH, SONAME
 * liboctopipe.so.MAJOR) and for octopipe.pc; MAJOR changes when the ABI does. */
#ifndef OCTOPIPE_VERSION_H
#define OCTOPIPE_VERSION_H

#define OCTOPIPE_VERSION_MAJOR 0
#define OCTOPIPE_VERSION_MINOR 1
#define OCTOPIPE_VERSION_PATCH 0
#define OCTOPIPE_VERSION "0.1.0"
/* One number that grows with every release: 10000 * MAJOR + 100 * MINOR + PATCH. */
#define OCTOPIPE_VERSION_NUMBER \
    (OCTOPIPE_VERSION_MAJOR * 10000 + OCTOPIPE_VERSION_MINOR * 100 + OCTOPIPE_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* "MAJOR.MINOR.PATCH" of the library linked at run time. */
const char *op_version(void);

#ifdef __cplusplus
}
#endif
#endif
