/* Packed objects: what Redis holds of an object, compressed (docs/store.md,
 * "Packed objects"). Every copy of an object in Redis (the hash's current
 * version and each history entry) is head + rv + tail, spliced by the write
 * scripts; a packed object has its head and its tail compressed apart, with
 * zstd and a fixed dictionary of typical objects, so the splice needs no
 * change and the scripts still never look inside an object:
 *
 *     0x01  varint(n)  <n bytes: head's frame>  <rv digits>  <tail's frame>
 *
 * Plain JSON starts with '{', so objects stored before (or by hand) read as
 * they are. The dictionary is part of the stored format: its text never
 * changes; another one would take another first byte. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "store_int.h"

/* Dictionary 1: objects as this system stores them, written for this
 * purpose (a Node, a Lease, the Scheduled Event, then a Pod as a Job's pod
 * is created, bound and running: the most common last, as zstd's nearest
 * matches are its cheapest). Never edit: stored objects depend on it. */
static const char pack_dict1[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"node-0\",\"labels\":{"
    "\"kubernetes.io/hostname\":\"node-0\",\"kubernetes.io/os\":\"linux\",\"kubernetes.io/arch\":\"amd64\","
    "\"topology.kubernetes.io/zone\":\"zone-0\",\"node.kubernetes.io/instance-type\":\"sim\"},"
    "\"annotations\":{},\"uid\":\"00000000-0000-4000-8000-000000000000\",\"creationTimestamp\":"
    "\"2026-01-01T00:00:00Z\",\"generation\":1,\"resourceVersion\":\"1\"},\"spec\":{\"podCIDR\":\"10.0.0.0/24\","
    "\"taints\":[{\"key\":\"node.kubernetes.io/not-ready\",\"effect\":\"NoSchedule\"}]},\"status\":{\"capacity\":"
    "{\"cpu\":\"256\",\"memory\":\"1024Gi\",\"pods\":\"110\",\"ephemeral-storage\":\"100Gi\"},\"allocatable\":"
    "{\"cpu\":\"256\",\"memory\":\"1024Gi\",\"pods\":\"110\",\"ephemeral-storage\":\"100Gi\"},\"conditions\":["
    "{\"type\":\"MemoryPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"2026-01-01T00:00:00Z\","
    "\"lastTransitionTime\":\"2026-01-01T00:00:00Z\",\"reason\":\"KubeletHasSufficientMemory\",\"message\":"
    "\"kubelet has sufficient memory available\"},{\"type\":\"DiskPressure\",\"status\":\"False\","
    "\"reason\":\"KubeletHasNoDiskPressure\"},{\"type\":\"PIDPressure\",\"status\":\"False\",\"reason\":"
    "\"KubeletHasSufficientPID\"},{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\","
    "\"message\":\"kubelet is posting ready status\"}],\"addresses\":[{\"type\":\"InternalIP\",\"address\":"
    "\"172.16.0.1\"},{\"type\":\"Hostname\",\"address\":\"node-0\"}],\"daemonEndpoints\":{\"kubeletEndpoint\":"
    "{\"Port\":10250}},\"nodeInfo\":{\"machineID\":\"\",\"systemUUID\":\"\",\"bootID\":\"\",\"kernelVersion\":"
    "\"\",\"osImage\":\"\",\"containerRuntimeVersion\":\"\",\"kubeletVersion\":\"v1.29.0\",\"kubeProxyVersion\":"
    "\"\",\"operatingSystem\":\"linux\",\"architecture\":\"amd64\"}}}"
    "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"node-0\","
    "\"namespace\":\"kube-node-lease\",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":"
    "\"node-0\",\"uid\":\"00000000-0000-4000-8000-000000000000\"}],\"uid\":\"\",\"creationTimestamp\":\"\","
    "\"generation\":1,\"resourceVersion\":\"1\"},\"spec\":{\"holderIdentity\":\"node-0\","
    "\"leaseDurationSeconds\":40,\"renewTime\":\"2026-01-01T00:00:00.000000Z\"}}"
    "{\"apiVersion\":\"v1\",\"kind\":\"Event\",\"metadata\":{\"name\":\"job-0-0.1800000000000000\","
    "\"namespace\":\"default\",\"uid\":\"00000000-0000-4000-8000-000000000000\",\"creationTimestamp\":"
    "\"2026-01-01T00:00:00Z\",\"generation\":1,\"resourceVersion\":\"1\"},\"involvedObject\":{\"apiVersion\":"
    "\"v1\",\"kind\":\"Pod\",\"name\":\"job-0-0\",\"namespace\":\"default\",\"uid\":"
    "\"00000000-0000-4000-8000-000000000000\"},\"reason\":\"Scheduled\",\"message\":\"Successfully assigned "
    "default/job-0-0 to node-0\",\"type\":\"Normal\",\"source\":{\"component\":\"peloton-placement\"},"
    "\"firstTimestamp\":\"2026-01-01T00:00:00Z\",\"lastTimestamp\":\"2026-01-01T00:00:00Z\",\"count\":1}"
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"job-0-0\",\"namespace\":\"default\","
    "\"labels\":{\"app\":\"job-0\",\"peloton.io/job\":\"job-0\",\"peloton.io/instance\":\"0\","
    "\"peloton.io/resource-pool\":\"pool-0\"},\"annotations\":{\"peloton.io/priority\":\"0\","
    "\"peloton.io/preemptible\":\"true\",\"peloton.io/revocable\":\"false\",\"peloton.io/config-version\":"
    "\"1000000000\",\"peloton.io/run\":\"1\",\"peloton.io/failures\":\"0\",\"peloton.io/lost\":\"0\","
    "\"peloton.io/queued-at\":\"2026-01-01T00:00:00.000Z\",\"peloton.io/admitted-at\":"
    "\"2026-01-01T00:00:00.000Z\",\"peloton.io/placed-at\":\"2026-01-01T00:00:00.000Z\"},\"ownerReferences\":"
    "[{\"apiVersion\":\"peloton.io/v1alpha1\",\"kind\":\"Job\",\"name\":\"job-0\",\"uid\":"
    "\"00000000-0000-4000-8000-000000000000\",\"controller\":true,\"blockOwnerDeletion\":true}],\"uid\":"
    "\"00000000-0000-4000-8000-000000000000\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\",\"generation\":1,"
    "\"resourceVersion\":\"1\"},\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"main\","
    "\"image\":\"busybox\",\"command\":[\"sleep\",\"3600\"],\"resources\":{\"requests\":{\"cpu\":\"100m\","
    "\"memory\":\"64Mi\"},\"limits\":{\"cpu\":\"1\",\"memory\":\"1Gi\"}},\"imagePullPolicy\":\"IfNotPresent\","
    "\"terminationMessagePath\":\"/dev/termination-log\",\"terminationMessagePolicy\":\"File\"}],"
    "\"nodeSelector\":{},\"tolerations\":[],\"schedulerName\":\"peloton\",\"terminationGracePeriodSeconds\":30,"
    "\"dnsPolicy\":\"ClusterFirst\",\"nodeName\":\"node-0\"},\"status\":{\"phase\":\"Pending\",\"conditions\":"
    "[{\"type\":\"PodScheduled\",\"status\":\"True\",\"lastProbeTime\":null,\"lastTransitionTime\":"
    "\"2026-01-01T00:00:00Z\"}]}}"
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"job-0-1\",\"namespace\":\"default\","
    "\"labels\":{\"app\":\"job-0\",\"peloton.io/job\":\"job-0\",\"peloton.io/instance\":\"1\","
    "\"peloton.io/resource-pool\":\"pool-0\"},\"annotations\":{\"peloton.io/priority\":\"0\","
    "\"peloton.io/preemptible\":\"true\",\"peloton.io/revocable\":\"false\",\"peloton.io/config-version\":"
    "\"1000000000\",\"peloton.io/run\":\"1\",\"peloton.io/failures\":\"0\",\"peloton.io/lost\":\"0\","
    "\"peloton.io/queued-at\":\"2026-01-01T00:00:00.000Z\",\"peloton.io/admitted-at\":"
    "\"2026-01-01T00:00:00.000Z\",\"peloton.io/placed-at\":\"2026-01-01T00:00:00.000Z\"},\"ownerReferences\":"
    "[{\"apiVersion\":\"peloton.io/v1alpha1\",\"kind\":\"Job\",\"name\":\"job-0\",\"uid\":"
    "\"00000000-0000-4000-8000-000000000000\",\"controller\":true,\"blockOwnerDeletion\":true}],\"uid\":"
    "\"00000000-0000-4000-8000-000000000000\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\",\"generation\":2,"
    "\"resourceVersion\":\"1\"},\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"c\","
    "\"image\":\"x\",\"resources\":{\"requests\":{\"cpu\":\"10m\",\"memory\":\"16Mi\"}}}],\"schedulerName\":"
    "\"peloton\",\"terminationGracePeriodSeconds\":30,\"dnsPolicy\":\"ClusterFirst\",\"nodeName\":\"node-0\"},"
    "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"PodReadyToStartContainers\",\"status\":"
    "\"True\",\"lastProbeTime\":null,\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"},{\"type\":"
    "\"Initialized\",\"status\":\"True\",\"lastProbeTime\":null,\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"},"
    "{\"type\":\"Ready\",\"status\":\"True\",\"lastProbeTime\":null,\"lastTransitionTime\":"
    "\"2026-01-01T00:00:00Z\"},{\"type\":\"ContainersReady\",\"status\":\"True\",\"lastProbeTime\":null,"
    "\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"},{\"type\":\"PodScheduled\",\"status\":\"True\","
    "\"lastProbeTime\":null,\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}],\"hostIP\":\"172.16.0.1\","
    "\"hostIPs\":[{\"ip\":\"172.16.0.1\"}],\"podIP\":\"10.0.0.1\",\"podIPs\":[{\"ip\":\"10.0.0.1\"}],"
    "\"startTime\":\"2026-01-01T00:00:00Z\",\"containerStatuses\":[{\"name\":\"c\",\"image\":\"x\","
    "\"imageID\":\"\",\"containerID\":\"kubelet-sim://00000000-0000-4000-8000-000000000000-0-0\",\"ready\":true,"
    "\"started\":true,\"restartCount\":0,\"state\":{\"running\":{\"startedAt\":\"2026-01-01T00:00:00Z\"}},"
    "\"lastState\":{}}]}}";

#define PACK_V1 0x01
/* zstd's fast mode: on pods of 1-2 KB it packs in ~2.3 us and unpacks in
 * ~0.4 (both halves) against ~5.3 and ~1.9 at level 1 or 3, for objects
 * ~13% larger (0.22 of their JSON against 0.19). The level is not part of
 * the format. */
#define PACK_LEVEL (-1)
/* objects below this stay plain (a Lease, a Namespace: little to gain, and
 * tools reading Redis by hand keep reading them) */
#define PACK_MIN_BYTES 512

struct store_pack {
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;
    ZSTD_CDict *cdict;
    ZSTD_DDict *ddict;
};

struct store_pack *store_pack_new(void) {
    struct store_pack *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    size_t dlen = sizeof pack_dict1 - 1;
    /* raw content (the text does not start with a dictionary's magic number);
     * for objects of a few KiB the two cost ~0.2 MiB per connection */
    p->cctx = ZSTD_createCCtx();
    p->dctx = ZSTD_createDCtx();
    p->cdict = ZSTD_createCDict(pack_dict1, dlen, PACK_LEVEL);
    p->ddict = ZSTD_createDDict(pack_dict1, dlen);
    if (!p->cctx || !p->dctx || !p->cdict || !p->ddict) {
        store_pack_free(p);
        return NULL;
    }
    return p;
}

void store_pack_free(struct store_pack *p) {
    if (!p) return;
    ZSTD_freeCCtx(p->cctx);
    ZSTD_freeDCtx(p->dctx);
    ZSTD_freeCDict(p->cdict);
    ZSTD_freeDDict(p->ddict);
    free(p);
}

/* One frame of src into dst (room cap); its size, or 0 when it failed. */
static size_t frame(struct store_pack *p, char *dst, size_t cap, const char *src, size_t n) {
    size_t z = ZSTD_compress_usingCDict(p->cctx, dst, cap, src, n, p->cdict);
    return ZSTD_isError(z) ? 0 : z;
}

void store_pack_blob(struct store_pack *p, struct store_blob *b) {
    size_t plain = b->head_len + b->tail_len;
    if (!p || plain < PACK_MIN_BYTES) return;
    size_t hcap = ZSTD_compressBound(b->head_len), tcap = ZSTD_compressBound(b->tail_len);
    char *out = malloc(1 + 10 + hcap + tcap);
    if (!out) return; /* plain is always valid */
    size_t hz = frame(p, out + 11, hcap, b->json, b->head_len);
    size_t at = 1;
    out[0] = PACK_V1;
    for (size_t v = hz; ; v >>= 7) { /* the head frame's length: LEB128 */
        out[at++] = (char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        if (v <= 0x7f) break;
    }
    if (hz) memmove(out + at, out + 11, hz);
    size_t tz = hz ? frame(p, out + at + hz, tcap, b->tail, b->tail_len) : 0;
    /* a frame that gains nothing, or one so small that a page counted in
     * packed bytes could hide more than STORE_PACK_MAX_RATIO times its size
     * (list pages are bounded by bytes in the script, which sees packed
     * bytes: store_lua.c), stays plain */
    size_t packed = at + hz + tz;
    if (!hz || !tz || packed >= plain || packed * STORE_PACK_MAX_RATIO < plain) {
        free(out);
        return;
    }
    b->pk = out;
    b->pk_head_len = at + hz;
    b->pk_tail = out + at + hz;
    b->pk_tail_len = tz;
}

/* The content size of the frame at src (n bytes), or -1 when unknown or past max. */
static long long frame_size(const char *src, size_t n, size_t max) {
    unsigned long long sz = ZSTD_getFrameContentSize(src, n);
    if (sz == ZSTD_CONTENTSIZE_UNKNOWN || sz == ZSTD_CONTENTSIZE_ERROR || sz > max) return -1;
    return (long long)sz;
}

int store_unpack(struct store_pack *p, const char *s, size_t len, size_t max, char **out, size_t *outlen) {
    *out = NULL;
    *outlen = 0;
    if (len == 0 || (unsigned char)s[0] != PACK_V1) return 0; /* plain */
    if (!p) return -EIO;
    size_t at = 1, hz = 0;
    for (int shift = 0;; shift += 7) {
        if (at >= len || shift > 28) return -EIO;
        unsigned char c = (unsigned char)s[at++];
        hz |= (size_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) break;
    }
    if (hz == 0 || hz > len - at) return -EIO;
    const char *hf = s + at, *rv = hf + hz, *end = s + len;
    const char *tf = rv;
    while (tf < end && *tf >= '0' && *tf <= '9') tf++;
    size_t rvlen = (size_t)(tf - rv), tz = (size_t)(end - tf);
    if (rvlen == 0 || rvlen > 20 || tz == 0) return -EIO;
    /* the frames must be whole: one frame each, nothing after it */
    if (ZSTD_findFrameCompressedSize(hf, hz) != hz || ZSTD_findFrameCompressedSize(tf, tz) != tz) return -EIO;
    long long hn = frame_size(hf, hz, max), tn = frame_size(tf, tz, max);
    if (hn < 0 || tn < 0 || (size_t)hn + rvlen + (size_t)tn > max) return -EIO;
    char *buf = malloc((size_t)hn + rvlen + (size_t)tn + 1);
    if (!buf) return -ENOMEM;
    size_t a = ZSTD_decompress_usingDDict(p->dctx, buf, (size_t)hn, hf, hz, p->ddict);
    size_t b = ZSTD_isError(a) || a != (size_t)hn
                   ? 0
                   : ZSTD_decompress_usingDDict(p->dctx, buf + hn + rvlen, (size_t)tn, tf, tz, p->ddict);
    if (ZSTD_isError(a) || a != (size_t)hn || ZSTD_isError(b) || b != (size_t)tn) {
        free(buf);
        return -EIO;
    }
    memcpy(buf + hn, rv, rvlen);
    *outlen = (size_t)hn + rvlen + (size_t)tn;
    buf[*outlen] = '\0';
    *out = buf;
    return 0;
}

int store_pack_text(struct store_pack *p, const char *s, size_t n, char **out, size_t *outlen) {
    *out = NULL;
    *outlen = 0;
    if (n < 64) return 1;
    size_t cap = ZSTD_compressBound(n);
    char *z = malloc(cap);
    if (!z) return -ENOMEM;
    size_t zn = frame(p, z, cap, s, n);
    if (!zn || zn >= n) {
        free(z);
        return 1;
    }
    char *t = realloc(z, zn); /* the frame's bytes only: many are kept at once */
    *out = t ? t : z;
    *outlen = zn;
    return 0;
}

int store_unpack_text(struct store_pack *p, const char *z, size_t zn, char *dst, size_t n) {
    size_t got = ZSTD_decompress_usingDDict(p->dctx, dst, n, z, zn, p->ddict);
    return ZSTD_isError(got) || got != n ? -EIO : 0;
}
