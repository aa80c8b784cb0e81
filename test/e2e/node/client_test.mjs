// The e2e checks of the JavaScript Kubernetes client (@kubernetes/client-node,
// pinned in package.json) against pelotond's API server. Run by
// test/e2e/test_client_node.py, which starts the services, writes the
// kubeconfig (KUBECONFIG) and runs this from the folder the client is
// installed in. Prints one line per check, "ok NAME" or "FAIL NAME: why", and
// exits 1 when any check failed.
import * as k8s from '@kubernetes/client-node';

console.log(`# node ${process.version}`);
const NS = 'default';
const kc = new k8s.KubeConfig();
kc.loadFromFile(process.env.KUBECONFIG);
const core = kc.makeApiClient(k8s.CoreV1Api);
const custom = kc.makeApiClient(k8s.CustomObjectsApi);

let failed = 0;
async function check(name, fn) {
  try {
    await fn();
    console.log(`ok ${name}`);
  } catch (e) {
    failed++;
    const why = String(e && e.stack ? e.stack : e).split('\n').slice(0, 6).join(' | ');
    console.log(`FAIL ${name}: ${why}`);
  }
}

function assert(cond, what) {
  if (!cond) throw new Error(`assertion failed: ${what}`);
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

// waitFor: polls pred every 50 ms until it holds or ms pass
async function waitFor(pred, ms, what) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (pred()) return;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

// expectError: fn must reject with an ApiException of this HTTP code whose
// body is a Kubernetes Status of that code and reason; returns the Status
async function expectError(fn, code, reason) {
  let err;
  try {
    await fn();
  } catch (e) {
    err = e;
  }
  assert(err, `no error (wanted ${code} ${reason})`);
  assert(err instanceof k8s.ApiException, `not an ApiException: ${err}`);
  assert(err.code === code, `code ${err.code}, wanted ${code}`);
  const status = typeof err.body === 'string' ? JSON.parse(err.body) : err.body;
  assert(status && status.kind === 'Status' && status.status === 'Failure', `body not a Status: ${err.body}`);
  assert(status.code === code && status.reason === reason, `Status ${status.code} ${status.reason}, wanted ${code} ${reason}`);
  return status;
}

// gone: get() answers 404 NotFound within 5 s (an object with a finalizer
// lingers until its controller removes it)
async function gone(get, what) {
  const end = Date.now() + 5000;
  for (;;) {
    try {
      await get();
    } catch (e) {
      assert(e instanceof k8s.ApiException && e.code === 404, `${what} after delete: ${e}`);
      return;
    }
    assert(Date.now() < end, `${what} is still there 5 s after delete`);
    await sleep(100);
  }
}

const pod = (name, labels = {}) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, labels },
  spec: { schedulerName: 'client-node-none', containers: [{ name: 'c', image: 'busybox:1.36' }] },
});

const patchAs = (type) => k8s.setHeaderOptions('Content-Type', type);

await check('list namespaces', async () => {
  const list = await core.listNamespace();
  const names = list.items.map((n) => n.metadata.name);
  assert(names.includes('default') && names.includes('kube-system'), `namespaces ${names}`);
  assert(list.metadata.resourceVersion, 'list resourceVersion');
});

await check('list nodes from kubelet-sim', async () => {
  const list = await core.listNode();
  assert(list.items.length === Number(process.env.NODES), `${list.items.length} nodes, wanted ${process.env.NODES}`);
});

await check('create pod, list and read it', async () => {
  const made = await core.createNamespacedPod({ namespace: NS, body: pod('cn-pod', { app: 'cn' }) });
  assert(made.metadata.uid && made.metadata.resourceVersion, 'uid and resourceVersion');
  assert(made.status.phase === 'Pending', `phase ${made.status.phase}`);
  const list = await core.listNamespacedPod({ namespace: NS, labelSelector: 'app=cn' });
  assert(list.items.map((p) => p.metadata.name).join() === 'cn-pod', 'label-selected list');
  const got = await core.readNamespacedPod({ name: 'cn-pod', namespace: NS });
  assert(got.spec.containers[0].image === 'busybox:1.36', 'image read back');
});

await check('create ConfigMap and read it', async () => {
  await core.createNamespacedConfigMap({
    namespace: NS,
    body: { metadata: { name: 'cn-cm', labels: { app: 'cn' } }, data: { k: 'v' } },
  });
  const got = await core.readNamespacedConfigMap({ name: 'cn-cm', namespace: NS });
  assert(got.data.k === 'v', `data ${JSON.stringify(got.data)}`);
});

await check('patch: JSON patch (the client default)', async () => {
  const got = await core.patchNamespacedPod({
    name: 'cn-pod', namespace: NS,
    body: [{ op: 'add', path: '/metadata/labels/json', value: 'one' }],
  });
  assert(got.metadata.labels.json === 'one' && got.metadata.labels.app === 'cn', JSON.stringify(got.metadata.labels));
});

await check('patch: merge patch', async () => {
  const got = await core.patchNamespacedPod(
    { name: 'cn-pod', namespace: NS, body: { metadata: { labels: { merge: 'two', json: null } } } },
    patchAs(k8s.PatchStrategy.MergePatch));
  const l = got.metadata.labels;
  assert(l.merge === 'two' && !('json' in l) && l.app === 'cn', JSON.stringify(l));
});

await check('patch: strategic merge patch', async () => {
  const got = await core.patchNamespacedPod(
    { name: 'cn-pod', namespace: NS, body: { metadata: { labels: { smp: 'three' } } } },
    patchAs(k8s.PatchStrategy.StrategicMergePatch));
  const l = got.metadata.labels;
  assert(l.smp === 'three' && l.merge === 'two' && l.app === 'cn', JSON.stringify(l));
  const cm = await core.patchNamespacedConfigMap(
    { name: 'cn-cm', namespace: NS, body: { data: { k2: 'v2' } } },
    patchAs(k8s.PatchStrategy.StrategicMergePatch));
  assert(cm.data.k === 'v' && cm.data.k2 === 'v2', JSON.stringify(cm.data));
});

await check('watch from a list resourceVersion sees ADDED then DELETED', async () => {
  const rv = (await core.listNamespacedConfigMap({ namespace: NS })).metadata.resourceVersion;
  const seen = [];
  let ended = null;
  const req = await new k8s.Watch(kc).watch(`/api/v1/namespaces/${NS}/configmaps`,
    { resourceVersion: rv, allowWatchBookmarks: true },
    (type, obj) => seen.push([type, obj.metadata.name]), (err) => { ended = err || 'done'; });
  try {
    await core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: 'cn-w' } } });
    await waitFor(() => seen.some((e) => e[0] === 'ADDED' && e[1] === 'cn-w'), 5000, 'ADDED cn-w');
    assert(ended === null, `watch ended early: ${ended}`);
    await core.deleteNamespacedConfigMap({ name: 'cn-w', namespace: NS });
    await waitFor(() => seen.some((e) => e[0] === 'DELETED' && e[1] === 'cn-w'), 5000, 'DELETED cn-w');
    const kinds = seen.filter((e) => e[0] !== 'BOOKMARK').map((e) => e.join(' '));
    assert(kinds.join() === 'ADDED cn-w,DELETED cn-w', `events ${JSON.stringify(seen)}`);
  } finally {
    req.abort();
  }
});

await check('informer sees add, update, delete in order', async () => {
  const events = [];
  let lists = 0; // one list, then the watch carries every event (a broken watch relists)
  const informer = k8s.makeInformer(kc, `/api/v1/namespaces/${NS}/pods`,
    () => { lists++; return core.listNamespacedPod({ namespace: NS, labelSelector: 'app=inf' }); }, 'app=inf');
  for (const verb of ['add', 'update', 'delete']) {
    informer.on(verb, (obj) => events.push([verb, obj.metadata.name, obj.metadata.labels.step || '']));
  }
  let errored = null;
  informer.on('error', (e) => { errored = e; });
  await informer.start();
  try {
    await core.createNamespacedPod({ namespace: NS, body: pod('cn-inf', { app: 'inf' }) });
    await waitFor(() => events.length >= 1, 5000, 'the add event');
    await core.patchNamespacedPod(
      { name: 'cn-inf', namespace: NS, body: { metadata: { labels: { step: 'patched' } } } },
      patchAs(k8s.PatchStrategy.MergePatch));
    await waitFor(() => events.some((e) => e[0] === 'update'), 5000, 'the update event');
    await core.deleteNamespacedPod({ name: 'cn-inf', namespace: NS, gracePeriodSeconds: 0 });
    await waitFor(() => events.some((e) => e[0] === 'delete'), 5000, `the delete event (got ${JSON.stringify(events)})`);
    assert(!errored, `informer error ${errored}`);
    const verbs = events.map((e) => e[0]);
    assert(verbs[0] === 'add' && verbs[verbs.length - 1] === 'delete' &&
           verbs.slice(1, -1).every((v) => v === 'update'), `order ${JSON.stringify(events)}`);
    assert(events.every((e) => e[1] === 'cn-inf'), `names ${JSON.stringify(events)}`);
    assert(events.find((e) => e[0] === 'update')[2] === 'patched', `update carries the label ${JSON.stringify(events)}`);
    assert(informer.list(NS).length === 0, 'cache empty after delete');
    assert(lists === 1, `${lists} lists`);
  } finally {
    await informer.stop();
  }
});

const RP = { group: 'peloton.io', version: 'v1alpha1', plural: 'resourcepools' };
await check('custom objects: ResourcePool create/get/list/patch/delete', async () => {
  const body = {
    apiVersion: 'peloton.io/v1alpha1', kind: 'ResourcePool',
    metadata: { name: 'cn-pool' },
    spec: { resources: [{ kind: 'cpu', reservation: '4', limit: '16' }, { kind: 'memory', reservation: '8Gi', limit: '32Gi' }] },
  };
  const made = await custom.createClusterCustomObject({ ...RP, body });
  assert(made.metadata.uid && made.kind === 'ResourcePool', JSON.stringify(made.metadata));
  const got = await custom.getClusterCustomObject({ ...RP, name: 'cn-pool' });
  assert(got.spec.resources[0].reservation === '4', JSON.stringify(got.spec));
  const list = await custom.listClusterCustomObject({ ...RP });
  assert(list.items.some((p) => p.metadata.name === 'cn-pool'), 'listed');
  const patched = await custom.patchClusterCustomObject(
    { ...RP, name: 'cn-pool', body: { metadata: { labels: { team: 'cn' } } } },
    patchAs(k8s.PatchStrategy.MergePatch));
  assert(patched.metadata.labels.team === 'cn', JSON.stringify(patched.metadata));
  const jp = await custom.patchClusterCustomObject(
    { ...RP, name: 'cn-pool', body: [{ op: 'replace', path: '/spec/resources/0/limit', value: '12' }] });
  assert(jp.spec.resources[0].limit === '12', JSON.stringify(jp.spec));
  // the pool carries the finalizer peloton.io/pool-protection: delete marks it,
  // and pelotond's resmgr role removes it once no job uses the pool
  const del = await custom.deleteClusterCustomObject({ ...RP, name: 'cn-pool' });
  assert(del.metadata.deletionTimestamp && del.metadata.finalizers.includes('peloton.io/pool-protection'),
    `delete reply ${JSON.stringify(del.metadata)}`);
  await gone(() => custom.getClusterCustomObject({ ...RP, name: 'cn-pool' }), 'the ResourcePool');
});

const PJ = { group: 'peloton.io', version: 'v1alpha1', plural: 'jobs' };
await check('custom objects: Job create/get/list/patch/delete', async () => {
  const body = {
    apiVersion: 'peloton.io/v1alpha1', kind: 'Job',
    metadata: { name: 'cn-job' },
    spec: {
      type: 'BATCH', resourcePool: 'cn-none', instanceCount: 2,
      template: { spec: { restartPolicy: 'Never', containers: [{ name: 'w', image: 'busybox:1.36' }] } },
    },
  };
  const made = await custom.createNamespacedCustomObject({ ...PJ, namespace: NS, body });
  assert(made.metadata.namespace === NS && made.spec.instanceCount === 2, JSON.stringify(made));
  const got = await custom.getNamespacedCustomObject({ ...PJ, namespace: NS, name: 'cn-job' });
  assert(got.spec.type === 'BATCH', JSON.stringify(got.spec));
  const list = await custom.listNamespacedCustomObject({ ...PJ, namespace: NS });
  assert(list.kind === 'JobList' && list.items.some((j) => j.metadata.name === 'cn-job'), `list ${list.kind}`);
  const patched = await custom.patchNamespacedCustomObject(
    { ...PJ, namespace: NS, name: 'cn-job', body: { metadata: { labels: { app: 'cn' } } } },
    patchAs(k8s.PatchStrategy.MergePatch));
  assert(patched.metadata.labels.app === 'cn', JSON.stringify(patched.metadata));
  await custom.deleteNamespacedCustomObject({ ...PJ, namespace: NS, name: 'cn-job' });
  await gone(() => custom.getNamespacedCustomObject({ ...PJ, namespace: NS, name: 'cn-job' }), 'the Job');
});

await check('error: 404 on a missing pod is an ApiException with a Status', async () => {
  const s = await expectError(() => core.readNamespacedPod({ name: 'cn-missing', namespace: NS }), 404, 'NotFound');
  assert(s.details && s.details.name === 'cn-missing' && s.details.kind === 'pods', JSON.stringify(s.details));
});

await check('error: 409 on creating an existing name', async () => {
  const s = await expectError(() => core.createNamespacedPod({ namespace: NS, body: pod('cn-pod') }), 409, 'AlreadyExists');
  assert(s.details && s.details.name === 'cn-pod', JSON.stringify(s.details));
  await expectError(() => core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: 'cn-cm' } } }),
    409, 'AlreadyExists');
});

await check('error: 422 on an invalid object names the field', async () => {
  // a bad name: kube-apiserver's wording, details.kind the kind, the field as a cause
  const s = await expectError(() => core.createNamespacedPod({ namespace: NS, body: pod('Bad_Name') }), 422, 'Invalid');
  assert(s.message.startsWith('Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"'), `message ${s.message}`);
  const c0 = (s.details && s.details.causes) || [];
  assert(s.details && s.details.name === 'Bad_Name' && s.details.kind === 'Pod' && c0.length === 1 &&
         c0[0].field === 'metadata.name' && c0[0].reason === 'FieldValueInvalid', JSON.stringify(s.details));
  // a bad label key: details.causes name the field, details.kind is the kind
  const s1 = await expectError(() => core.createNamespacedPod({ namespace: NS, body: pod('cn-bad', { 'a/b/c': 'v' }) }),
    422, 'Invalid');
  const c1 = (s1.details && s1.details.causes) || [];
  assert(s1.details.kind === 'Pod' && c1.length === 1 && c1[0].field === 'metadata.labels' &&
         c1[0].reason === 'FieldValueInvalid', `details ${JSON.stringify(s1.details)}`);
  assert(s1.message.startsWith('Pod "cn-bad" is invalid: metadata.labels: Invalid value: "a/b/c"'), s1.message);
  // a custom object against its CRD's schema: details.causes name each field
  const job = {
    apiVersion: 'peloton.io/v1alpha1', kind: 'Job', metadata: { name: 'cn-bad' },
    spec: { type: 'BATCH', resourcePool: 'p', instanceCount: 'two', template: { spec: { containers: [{ name: 'w', image: 'b' }] } } },
  };
  const s2 = await expectError(() => custom.createNamespacedCustomObject({ ...PJ, namespace: NS, body: job }), 422, 'Invalid');
  const causes = (s2.details && s2.details.causes) || [];
  assert(causes.length === 1 && causes[0].field === 'spec.instanceCount' && causes[0].reason === 'FieldValueTypeInvalid',
    `causes ${JSON.stringify(causes)}`);
});

await check('delete pod and ConfigMap', async () => {
  await core.deleteNamespacedPod({ name: 'cn-pod', namespace: NS, gracePeriodSeconds: 0 });
  await core.deleteNamespacedConfigMap({ name: 'cn-cm', namespace: NS });
  await expectError(() => core.readNamespacedConfigMap({ name: 'cn-cm', namespace: NS }), 404, 'NotFound');
  const list = await core.listNamespacedPod({ namespace: NS, labelSelector: 'app=cn' });
  assert(list.items.length === 0, `pods left ${list.items.map((p) => p.metadata.name)}`);
});

process.exit(failed ? 1 : 0);
