/* csv_check.c: the C port of torch's CSV rules (src/export/torch_check.c) as a command, for
 * the differential test against torch itself (tests/torch/test_check_vs_torch.py).
 *
 *   csv_check FILE P S M   ->  exit 0 and the compute_comms rows on stdout,
 *                              or exit 1 and "refused: <reason>" on stdout */
#include <stdlib.h>

#include "octopipe/export.h"

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: csv_check FILE P S M\n");
        return 2;
    }
    char *text = NULL;
    op_err e = {0};
    op_buf out = {0};
    int rc = op_read_file(argv[1], &text, NULL, &e);
    if (rc == OP_OK)
        rc = op_export_torch_csv_lower(text, atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), &out, &e);
    if (rc == OP_OK) fwrite(out.data, 1, out.len, stdout);
    else printf("refused: %s\n", e.msg);
    free(text);
    op_buf_free(&out);
    return rc == OP_OK ? 0 : 1;
}
