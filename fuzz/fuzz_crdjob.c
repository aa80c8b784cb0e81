/* Fuzz target: the Job decoder (src/k8s/crd_job.c) on any JSON a client
 * could send as a jobs.peloton.io object, spec.stoppedInstances included.
 * Checks that both entry points agree, that a refusal says why, and that
 * the stopped ranges come out sorted, merged and found by crd_job_stopped. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crd_job.h"
#include "jparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_error_t je;
    json_t *doc = jparse_loadb((const char *)data, size, 0, &je);
    if (!doc) return 0;
    struct job_spec spec;
    struct crd_job_extra x;
    char pool[64], err[512] = "", err2[512] = "";
    int rc = crd_job_decode(doc, &spec, pool, sizeof pool, err, sizeof err);
    int rc2 = crd_job_decode_extra(doc, &x, err2, sizeof err2);
    if (rc && !err[0]) abort();
    if (rc2 && !err2[0]) abort();
    if (!rc && rc2) abort(); /* the extras decode whenever the whole Job does */
    if (!rc2) {
        if (x.nstopped > CRD_JOB_MAX_STOPPED) abort();
        for (uint32_t i = 0; i < x.nstopped; i++) {
            const struct crd_job_range *g = &x.stopped[i];
            if (g->from >= g->to || (i && g->from <= x.stopped[i - 1].to)) abort();
            if (!crd_job_stopped(&x, g->from) || !crd_job_stopped(&x, g->to - 1) || crd_job_stopped(&x, g->to)) abort();
        }
    }
    json_decref(doc);
    return 0;
}
