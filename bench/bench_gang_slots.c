/* What holding a gang to the nodes' pod limits costs placement
 * (cluster_place_gang, src/model/cluster.c) over the core's place_gang
 * alone (with place_gang_undo, as placement did): each gang placed on the
 * same cluster model and nothing left counted, the two in alternating
 * pairs, in thread CPU time; the medians per task and the machine's load
 * are printed. A gang of 1,000 small tasks packs more than a node's 110
 * pods: cluster_place_gang places it member by member. Prints figures;
 * never fails on speed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "cluster.h"
#include "place.h"

#define NODES 2000

static uint64_t cpu_ns(void) { /* this thread's CPU time: other work on the machine does not count */
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#define PAIRS 7

static json_t *node(int i) {
    char name[32];
    snprintf(name, sizeof name, "node-%05d", i);
    return json_pack("{s:s, s:{s:s}, s:{s:{s:s, s:s, s:s}, s:[{s:s, s:s}]}}", "kind", "Node", "metadata", "name",
                     name, "status", "allocatable", "cpu", "64", "memory", "256Gi", "pods", "110", "conditions",
                     "type", "Ready", "status", "True");
}

/* ns per task of placing and undoing ngangs gangs of size tasks, through
 * the model (slots) or the core alone. */
static double run(struct cluster *c, const struct place_task *t, uint32_t size, int ngangs, bool slots) {
    uint32_t *hosts = malloc(size * sizeof *hosts);
    if (!hosts) exit(1);
    struct place_gang g = {.id = "bench", .job = "bench", .strategy = PLACE_PACK, .tasks = t, .ntasks = size};
    struct place_failure fail;
    uint64_t t0 = cpu_ns();
    for (int i = 0; i < ngangs; i++) {
        int rc = slots ? cluster_place_gang(c, &g, hosts, &fail) : place_gang(cluster_engine(c), &g, hosts, &fail);
        if (rc) {
            fprintf(stderr, "bench_gang_slots: placement failed: %s\n", strerror(-rc));
            exit(1);
        }
        if (!slots) place_gang_undo(cluster_engine(c), &g, hosts); /* cluster_place_gang leaves nothing counted */
    }
    double ns = (double)(cpu_ns() - t0) / ((double)ngangs * size);
    free(hosts);
    return ns;
}

int main(void) {
    struct cm_options o;
    cm_options_default(&o);
    struct cluster *c = cluster_new(&o);
    if (!c) return 1;
    for (int i = 0; i < NODES; i++) {
        json_t *n = node(i);
        if (cluster_node_set(c, n)) return 1;
        json_decref(n);
    }
    if (cluster_refresh(c)) return 1;
    static const uint32_t sizes[] = {8, 1000};
    struct place_task *t = calloc(1000, sizeof *t);
    if (!t) return 1;
    for (int i = 0; i < 1000; i++) t[i].req = (struct resvec){{100, (int64_t)256 << 20, 0, 0}};
    char load[64] = "?";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (!fgets(load, sizeof load, f)) snprintf(load, sizeof load, "?");
        load[strcspn(load, "\n")] = 0;
        fclose(f);
    }
    printf("bench_gang_slots: %d nodes of 64 cores and 110 pods; load %s\n", NODES, load);
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        uint32_t size = sizes[s];
        int ngangs = size == 8 ? 20000 : 100;
        double core[PAIRS], model[PAIRS];
        for (int p = 0; p < PAIRS; p++) { /* alternating which goes first */
            if (p % 2) model[p] = run(c, t, size, ngangs, true);
            core[p] = run(c, t, size, ngangs, false);
            if (!(p % 2)) model[p] = run(c, t, size, ngangs, true);
        }
        bench_sort(core, PAIRS);
        bench_sort(model, PAIRS);
        char name[64];
        snprintf(name, sizeof name, "gang of %u: place_gang, per task", size);
        bench_report(name, core[PAIRS / 2], "ns", "median");
        snprintf(name, sizeof name, "gang of %u: cluster_place_gang, per task", size);
        bench_report(name, model[PAIRS / 2], "ns", "median; + the pod-slot check");
    }
    free(t);
    cluster_free(c);
    return 0;
}
