/* The Mesos driver's agents and their Nodes (mesosdrv_int.h): what the
 * master says of each agent (GET_AGENTS on the operator API, offers), and
 * the Node objects written from it. */
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostmgr.h"
#include "labels.h"
#include "mesosdrv_int.h"

/* ---- agents and their Nodes ---- */

struct md_agent *md_agent_get(struct mdrv *d, const char *id, bool create) {
    struct md_agent *a = strmap_get(&d->agents, id);
    if (a || !create) return a;
    if (!(a = calloc(1, sizeof *a)) || !(a->id = strdup(id)) || strmap_put(&d->agents, id, a, NULL)) {
        if (a) free(a->id);
        free(a);
        return NULL;
    }
    a->state = AG_ACTIVE;
    a->dirty = true;
    d->agents_walk = true;
    d->st.agents++;
    return a;
}

void md_offers_free(struct md_offer *o) {
    while (o) {
        struct md_offer *n = o->next;
        free(o->id);
        free(o);
        o = n;
    }
}

void md_agent_free(struct md_agent *a) {
    md_offers_free(a->offers);
    strmap_free(&a->wait);
    free(a->id);
    free(a->hostname);
    json_decref(a->labels);
    free(a);
}

/* A Kubernetes node name from a hostname: lowercase DNS subdomain, else NULL. */
static bool valid_node_name(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (!n || n > NAME_MAX_LEN) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '.')) return false;
    return s[0] != '-' && s[0] != '.' && s[n - 1] != '-' && s[n - 1] != '.';
}

static bool valid_label_part(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n > max) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '-' || s[i] == '_' || s[i] == '.'))
            return false;
    return true;
}

json_t *mdrv_attr_labels(const json_t *attrs) {
    json_t *l = json_object();
    size_t i;
    const json_t *a;
    json_array_foreach(attrs, i, a) {
        if (i >= 64) break;
        const char *name = json_string_value(json_object_get(a, "name"));
        const char *text = json_string_value(json_object_get(json_object_get(a, "text"), "value"));
        char num[32];
        const json_t *sc = json_object_get(json_object_get(a, "scalar"), "value");
        if (!text && json_is_number(sc)) {
            snprintf(num, sizeof num, "%g", json_number_value(sc));
            text = num;
        }
        if (!name || !name[0] || !text || !valid_label_part(name, 63) || !valid_label_part(text, 63)) continue;
        json_object_set_new(l, name, json_string(text));
        if (!strcmp(name, "zone")) json_object_set_new(l, "topology.kubernetes.io/zone", json_string(text));
    }
    return l;
}

/* What an agent is known by: an offer or GET_AGENTS. */
void md_agent_learn(struct mdrv *d, const char *id, const char *hostname, const struct mesos_scalars *total,
                        const json_t *attrs, int state) {
    struct md_agent *a = md_agent_get(d, id, true);
    if (!a) return;
    if (hostname && (!a->hostname || strcmp(a->hostname, hostname))) {
        free(a->hostname);
        a->hostname = strdup(hostname);
        a->dirty = true;
    }
    if (total && memcmp(total, &a->total, sizeof *total)) {
        a->total = *total;
        a->dirty = true;
    }
    if (attrs) {
        json_t *l = mdrv_attr_labels(attrs);
        if (!a->labels || !json_equal(l, a->labels)) {
            json_decref(a->labels);
            a->labels = l;
            a->dirty = true;
        } else {
            json_decref(l);
        }
    }
    if (state != a->state) {
        fprintf(stderr, "level=info msg=\"mesos: agent %s\" agent=%s hostname=%s\n",
                state == AG_ACTIVE ? "active" : state == AG_UNREACHABLE ? "unreachable" : "gone", id,
                a->hostname ? a->hostname : "");
        a->state = state;
        a->dirty = true;
        a->retry_at_ms = 0;
    }
    if (state != AG_ACTIVE) {
        md_offers_free(a->offers);
        a->offers = NULL;
    }
    if (a->dirty) d->agents_walk = true;
}

/* A quantity of v units (scale: of the suffix per unit); whole units without the suffix. */
static void quantity(char *out, size_t len, double v, const char *unit, double scale) {
    long long q = llround(v * scale), s = llround(scale);
    if (s > 1 && q % s == 0) snprintf(out, len, "%lld", q / s);
    else snprintf(out, len, "%lld%s", q, unit);
}

static json_t *node_resources(const struct md_agent *a) {
    char cpu[32], mem[32], disk[32], gpu[32];
    quantity(cpu, sizeof cpu, a->total.cpus, "m", 1000);
    quantity(mem, sizeof mem, a->total.mem, "Mi", 1);
    quantity(disk, sizeof disk, a->total.disk, "Mi", 1);
    quantity(gpu, sizeof gpu, a->total.gpus, "", 1);
    json_t *r = json_pack("{s:s, s:s, s:s, s:s}", "cpu", cpu, "memory", mem, "ephemeral-storage", disk, "pods",
                          POD_LIMIT);
    if (r && a->total.gpus > 0) json_object_set_new(r, "nvidia.com/gpu", json_string(gpu));
    return r;
}

static json_t *node_status(const struct md_agent *a) {
    char now[32];
    hostmgr_format_time(md_wall_ms(), false, now);
    bool up = a->state == AG_ACTIVE;
    json_t *cond = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "type", "Ready", "status", up ? "True" : "Unknown",
                             "reason", up ? "AgentActive" : "AgentUnreachable", "message",
                             up ? "the Mesos agent is active" : "the Mesos master reports the agent unreachable",
                             "lastHeartbeatTime", now, "lastTransitionTime", now);
    return json_pack("{s:o, s:o, s:[o], s:[{s:s, s:s}]}", "capacity", node_resources(a), "allocatable",
                     node_resources(a), "conditions", cond, "addresses", "type", "Hostname", "address",
                     a->hostname);
}

static json_t *node_meta_labels(const struct md_agent *a) {
    json_t *l = a->labels ? json_deep_copy(a->labels) : json_object();
    json_object_set_new(l, MDRV_LABEL_BACKEND, json_string("mesos"));
    json_object_set_new(l, "kubernetes.io/hostname", json_string(a->hostname));
    json_object_set_new(l, "kubernetes.io/os", json_string("linux"));
    return l;
}

static json_t *node_taints(const struct md_agent *a) {
    if (a->state == AG_ACTIVE) return json_null();
    char now[32];
    hostmgr_format_time(md_wall_ms(), false, now);
    return json_pack("[{s:s, s:s, s:s}]", "key", HOSTMGR_TAINT_UNREACHABLE, "effect", "NoExecute", "timeAdded", now);
}

static void node_step(struct mdrv *d, struct md_op *op, struct md_agent *a);

static void node_write_end(struct mdrv *d, struct md_op *op, bool ok, long status, const char *error) {
    struct md_agent *a = md_agent_get(d, op->node, false);
    d->agents_walk = true;
    if (a) {
        a->busy = false;
        if (ok) {
            a->fails = 0;
            if (a->state == AG_GONE && op->kind == OP_NODE_DELETE) {
                strmap_del(&d->agents, a->id);
                md_agent_free(a);
            }
        } else {
            a->dirty = true;
            a->fails++;
            a->retry_at_ms = md_wall_ms() + (a->fails > 5 ? 30000 : 1000 << a->fails);
            fprintf(stderr, "level=warn msg=\"mesos: node write failed\" agent=%s status=%ld error=\"%s\"\n",
                    op->node, status, error ? error : "");
        }
    }
    md_op_free(op);
    md_kick(d);
}

static void on_node_done(void *ud, const struct kc_response *r) {
    struct md_op *op = ud;
    if (!md_op_landed(op)) return;
    struct mdrv *d = op->d;
    struct md_agent *a = md_agent_get(d, op->node, false);
    if (!a) {
        md_op_free(op);
        return;
    }
    switch (op->kind) {
    case OP_NODE_POST:
        if (md_ok2xx(r->status)) return node_write_end(d, op, true, r->status, NULL);
        if (r->status != 409) return node_write_end(d, op, false, r->status, r->error);
        if (kc_informer_synced(d->nodes) && !kc_informer_get(d->nodes, "", a->hostname)) {
            /* a Node of that name that is not a Mesos agent's (a Kubelet's): never taken over */
            a->fails = 5;
            return node_write_end(d, op, false, r->status, "the node name is taken by a node that is not a Mesos agent's");
        }
        op->kind = OP_NODE_META; /* it exists: bring it up to date */
        return node_step(d, op, a);
    case OP_NODE_META:
        if (!md_ok2xx(r->status)) return node_write_end(d, op, false, r->status, r->error);
        op->kind = OP_NODE_STATUS;
        return node_step(d, op, a);
    case OP_NODE_STATUS:
    case OP_NODE_DELETE:
        return node_write_end(d, op, md_ok2xx(r->status) || r->status == 404, r->status, r->error);
    default:
        md_op_free(op);
    }
}

static void node_step(struct mdrv *d, struct md_op *op, struct md_agent *a) {
    char path[sizeof NODES_PATH + 3 * NAME_MAX_LEN + 16];
    int n = snprintf(path, sizeof path, "%s", NODES_PATH);
    if (op->kind != OP_NODE_POST) {
        n += snprintf(path + n, sizeof path - (size_t)n, "/");
        n += kc_escape(a->hostname, path + n, sizeof path - (size_t)n);
    }
    json_t *body;
    const char *method = "PATCH", *ct = MERGE_PATCH;
    switch (op->kind) {
    case OP_NODE_POST:
        method = "POST";
        ct = NULL;
        body = json_pack("{s:s, s:s, s:{s:s, s:o, s:{s:s}}, s:{s:o}, s:o}", "kind", "Node", "apiVersion", "v1",
                         "metadata", "name", a->hostname, "labels", node_meta_labels(a), "annotations",
                         MDRV_ANN_AGENT, a->id, "spec", "taints", node_taints(a), "status", node_status(a));
        if (json_is_null(json_object_get(json_object_get(body, "spec"), "taints")))
            json_object_del(json_object_get(body, "spec"), "taints");
        break;
    case OP_NODE_META: {
        /* a draining agent's Node is cordoned, and so is one in host
         * maintenance (hostmgr.c cordons it; completing it uncordons) */
        const json_t *node = kc_informer_get(d->nodes, "", a->hostname);
        bool cordon = a->drain || md_ann(node, PA_MAINTENANCE);
        body = json_pack("{s:{s:o, s:{s:s}}, s:{s:o, s:o}}", "metadata", "labels", node_meta_labels(a), "annotations",
                         MDRV_ANN_AGENT, a->id, "spec", "taints", node_taints(a), "unschedulable",
                         cordon ? json_true() : json_null());
        break;
    }
    case OP_NODE_STATUS:
        snprintf(path + n, sizeof path - (size_t)n, "/status");
        body = json_pack("{s:o}", "status", node_status(a));
        break;
    default:
        method = "DELETE";
        ct = NULL;
        body = NULL;
    }
    if (!md_op_send(op, method, path, body, ct, on_node_done)) {
        a->busy = false;
        a->dirty = true;
        a->retry_at_ms = md_wall_ms() + 1000;
    }
}

void md_node_write(struct mdrv *d, struct md_agent *a) {
    if (!a->hostname || !valid_node_name(a->hostname)) {
        a->dirty = false; /* a hostname that is no node name: the agent stays out of the fleet */
        fprintf(stderr, "level=warn msg=\"mesos: agent hostname is not a node name\" agent=%s\n", a->id);
        return;
    }
    struct md_op *op = md_op_new(d, a->state == AG_GONE ? OP_NODE_DELETE : OP_NODE_POST);
    if (!op || !(op->node = strdup(a->id))) {
        if (op) md_op_free(op);
        return;
    }
    a->dirty = false;
    a->busy = true;
    node_step(d, op, a);
}

/* ---- GET_AGENTS on the operator API (a worker thread: one blocking POST) ---- */

struct agents_job {
    uv_work_t w;
    struct mdrv *d;
    char *post;          /* the call; GET_AGENTS when NULL */
    char *drain_agent;   /* DRAIN_AGENT: the agent id */
    char url[MCLIENT_URL_MAX + 16];
    char *body;
    size_t len;
    long status;
    bool too_big;
};

static size_t on_body(char *p, size_t sz, size_t nm, void *ud) {
    struct agents_job *j = ud;
    size_t n = sz * nm;
    if (j->len + n > GET_AGENTS_MAX) {
        j->too_big = true;
        return 0;
    }
    char *b = realloc(j->body, j->len + n + 1);
    if (!b) return 0;
    memcpy(b + j->len, p, n);
    j->body = b;
    j->len += n;
    b[j->len] = 0;
    return n;
}

static void agents_work(uv_work_t *w) {
    struct agents_job *j = w->data;
    CURL *c = curl_easy_init();
    if (!c) return;
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = curl_slist_append(h, "Accept: application/json");
    curl_easy_setopt(c, CURLOPT_URL, j->url);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, j->post ? j->post : "{\"type\":\"GET_AGENTS\"}");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, j);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &j->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
}


static const char *agent_id_of(const json_t *x) {
    const char *id = mesos_id_get(json_object_get(x, "agent_info"), "id");
    return id ? id : mesos_id_get(x, "id");
}

int mdrv_agent_decode(const json_t *x, struct mdrv_agent_info *out) {
    const json_t *info = json_object_get(x, "agent_info");
    memset(out, 0, sizeof *out);
    out->id = mesos_id_get(info, "id");
    out->hostname = json_string_value(json_object_get(info, "hostname"));
    const json_t *res = json_object_get(x, "total_resources");
    if (!res) res = json_object_get(info, "resources");
    char err[200];
    if (!out->id || !out->id[0] || !out->hostname || mesos_resources_parse(res, &out->total, NULL, err, sizeof err))
        return -1;
    const double max = MDRV_SCALAR_MAX;
    if (!(out->total.cpus <= max && out->total.mem <= max && out->total.disk <= max && out->total.gpus <= max))
        return -1;
    out->attributes = json_object_get(info, "attributes");
    out->active = !json_is_false(json_object_get(x, "active"));
    return 0;
}

static void agents_apply(struct mdrv *d, const json_t *ga) {
    struct strmap seen = {0};
    size_t i;
    const json_t *x;
    json_array_foreach(json_object_get(ga, "agents"), i, x) {
        struct mdrv_agent_info ai;
        if (mdrv_agent_decode(x, &ai)) continue;
        md_agent_learn(d, ai.id, ai.hostname, &ai.total, ai.attributes, ai.active ? AG_ACTIVE : AG_UNREACHABLE);
        strmap_put(&seen, ai.id, (void *)1, NULL);
    }
    json_array_foreach(json_object_get(ga, "unreachable_agents"), i, x) {
        const char *id = agent_id_of(x);
        if (!id) continue;
        const char *host = json_string_value(json_object_get(x, "hostname"));
        if (!host) host = json_string_value(json_object_get(json_object_get(x, "agent_info"), "hostname"));
        md_agent_learn(d, id, host, NULL, NULL, AG_UNREACHABLE);
        strmap_put(&seen, id, (void *)1, NULL);
    }
    /* agents the master no longer has: their Nodes go */
    size_t pos = 0;
    const char *k;
    void *v;
    while (strmap_next(&d->agents, &pos, &k, &v))
        if (!strmap_get(&seen, k)) md_agent_learn(d, k, NULL, NULL, NULL, AG_GONE);
    strmap_free(&seen);
}

/* Mesos Nodes whose agent the driver does not know after GET_AGENTS: gone too. */
static int stale_node(void *ud, json_t *node) {
    struct mdrv *d = ud;
    const char *id = md_ann(node, MDRV_ANN_AGENT), *name = md_str(node, "name");
    if (!id || !name || md_agent_get(d, id, false)) return 0;
    struct md_agent *a = md_agent_get(d, id, true);
    if (a) {
        a->hostname = strdup(name);
        a->state = AG_GONE;
        a->dirty = true;
    }
    return 0;
}

static void drain_done(uv_work_t *w, int status) {
    struct agents_job *j = w->data;
    struct mdrv *d = j->d;
    (void)status;
    struct md_agent *a = d->stopped ? NULL : md_agent_get(d, j->drain_agent, false);
    if (a) {
        a->drain_sent = j->status == 200;
        a->busy = false;
        if (!a->drain_sent) {
            a->retry_at_ms = md_wall_ms() + 5000;
            fprintf(stderr, "level=warn msg=\"mesos: DRAIN_AGENT failed\" agent=%s status=%ld body=\"%.200s\"\n", a->id,
                    j->status, j->body ? j->body : "");
        } else {
            fprintf(stderr, "level=info msg=\"mesos: agent draining\" agent=%s\n", a->id);
        }
        md_kick(d);
    }
    free(j->post);
    free(j->drain_agent);
    free(j->body);
    free(j);
}

void md_drain_agent(struct mdrv *d, struct md_agent *a) {
    struct agents_job *j = calloc(1, sizeof *j);
    json_t *c = json_pack("{s:s, s:{s:o}}", "type", "DRAIN_AGENT", "drain_agent", "agent_id", mesos_id(a->id));
    if (!j || !c || !(j->post = json_dumps(c, JSON_COMPACT)) || !(j->drain_agent = strdup(a->id))) {
        json_decref(c);
        if (j) free(j->post);
        free(j);
        return;
    }
    json_decref(c);
    j->d = d;
    j->w.data = j;
    snprintf(j->url, sizeof j->url, "%s/api/v1", d->mc ? mclient_leader(d->mc) : d->master);
    a->busy = true; /* one write about the agent at a time */
    if (uv_queue_work(d->loop, &j->w, agents_work, drain_done)) {
        a->busy = false;
        free(j->post);
        free(j->drain_agent);
        free(j);
    }
}

static void agents_done(uv_work_t *w, int status) {
    struct agents_job *j = w->data;
    struct mdrv *d = j->d;
    (void)status;
    if (!d->stopped) {
        d->agents_busy = false;
        json_error_t je;
        json_t *root = j->status == 200 && j->body ? json_loads(j->body, 0, &je) : NULL;
        const json_t *ga = json_object_get(root, "get_agents");
        if (json_is_object(ga)) {
            agents_apply(d, ga);
            if (kc_informer_synced(d->nodes)) kc_informer_foreach(d->nodes, stale_node, d);
        } else {
            fprintf(stderr, "level=warn msg=\"mesos: GET_AGENTS failed\" status=%ld too_big=%d\n", j->status,
                    j->too_big);
        }
        json_decref(root);
        if (d->agents_again) {
            d->agents_again = false;
            md_get_agents(d);
        }
        md_kick(d);
    }
    free(j->body);
    free(j);
}

void md_get_agents(struct mdrv *d) {
    if (d->agents_busy) {
        d->agents_again = true;
        return;
    }
    struct agents_job *j = calloc(1, sizeof *j);
    if (!j) return;
    j->d = d;
    j->w.data = j;
    snprintf(j->url, sizeof j->url, "%s/api/v1", d->mc ? mclient_leader(d->mc) : d->master);
    d->agents_busy = true;
    if (uv_queue_work(d->loop, &j->w, agents_work, agents_done)) {
        d->agents_busy = false;
        free(j);
    }
}
