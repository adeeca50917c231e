/* out.h: how OctoPipe writes an output file (plan, export, trace, SVG, checkpoint, profile).
 *
 * Rules, the same for every output flag of every command:
 *  - "-" is standard output; so is a link to it (/dev/stdout, /proc/self/fd/1), and a link to
 *    another open descriptor (/dev/fd/N, /dev/stderr) is written through that descriptor.
 *  - A regular file, or a path that does not exist yet, is replaced atomically: a temporary
 *    file in the same directory, fsync, rename.  A reader never sees half a file, a failed
 *    write leaves the old file as it was, and no temporary file stays behind.
 *  - Anything else is written straight into, never replaced: a device (/dev/null), a FIFO, a
 *    terminal.  A symbolic link is followed and its target is written by these same rules, so
 *    the link stays a link.
 *  - op_out_check tells, before any work starts, whether a path can be written; the caller
 *    prints its one line and exits 2 instead of computing a result it cannot keep.
 *  - An output never replaces or writes into a file the process named as an input
 *    (op_out_protect): `export p.json --svg p.json` would otherwise turn the plan into a
 *    picture.  Checked by op_out_check and again by op_out_write. */
#ifndef OCTOPIPE_OUT_H
#define OCTOPIPE_OUT_H
#include "octopipe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when path names standard output: "-", or a symbolic link to what fd 1 has open. */
int op_out_is_stdout(const char *path);

/* Checks that path can be written under the rules above without writing it: "-" always can;
 * an existing directory cannot; a new or regular file needs its directory to exist and take a
 * new file (probed by creating and removing a temporary file there, which also works as root
 * and on read-only mounts); a device or FIFO must be writable.  OP_OK or OP_EIO with one line
 * "<path>: cannot write: <why>". */
int op_out_check(const char *path, op_err *err);

/* Records path (when it is a regular file) as an input of this process: op_out_check and
 * op_out_write then refuse it, or any other name of the same file ("<path>: cannot write: it
 * is the input <input>; ...").  The commands call it for the files they read (model, cluster,
 * plan, profile); library readers do not, so a program may load a plan and save it in place,
 * and a training run may replace the checkpoint it resumed from. */
void op_out_protect(const char *path);

/* 1 when a and b name the same output: both stdout, or (through links and other spellings)
 * the same existing file, or the same new name in the same directory. */
int op_out_same(const char *a, const char *b);

/* Writes len bytes to path under the rules above.  OP_OK or OP_EIO with one line. */
int op_out_write(const char *path, const void *data, size_t len, op_err *err);

/* Writes n outputs (a NULL path is skipped) so that a failure in any leaves no regular file
 * of the set written: all regular files go to temporary files first, then devices, FIFOs and
 * stdout are written, and only then are the temporary files renamed into place.  OP_OK or
 * OP_EIO with one line. */
int op_out_write_n(int n, const char *const *paths, const void *const *data, const size_t *lens,
                   op_err *err);

#ifdef __cplusplus
}
#endif
#endif
