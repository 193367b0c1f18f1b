// Create, read, list and delete a Flock through kube-apiserver with
// @kubernetes/client-node's CustomObjectsApi. Flocks are served by an
// aggregated API server, not a CRD, but to a client they are just another
// resource: group flock.dev, version v1alpha1, plural flocks.
//
//   KUBECONFIG=/path/to/kubeconfig node flock.mjs [namespace] [name]
//
// Prints one line per step and exits 1 on the first failure.
import * as k8s from '@kubernetes/client-node';

const group = 'flock.dev';
const version = 'v1alpha1';
const plural = 'flocks';

const namespace = process.argv[2] || 'default';
const name = process.argv[3] || 'node-demo';

const kc = new k8s.KubeConfig();
kc.loadFromDefault(); // $KUBECONFIG, then ~/.kube/config, then in-cluster
const api = kc.makeApiClient(k8s.CustomObjectsApi);

const flock = {
  apiVersion: `${group}/${version}`,
  kind: 'Flock',
  metadata: { name, namespace, labels: { 'app.kubernetes.io/managed-by': 'node-client' } },
  spec: {
    replicas: 1,
    selector: { matchLabels: { app: name } },
    template: {
      metadata: { labels: { app: name } },
      spec: { containers: [{ name: 'app', image: 'busybox:1.36', command: ['sleep', 'infinity'] }] },
    },
  },
};

function explain(err) {
  if (err && err.code !== undefined) {
    let body = err.body;
    try {
      body = JSON.parse(err.body).message;
    } catch {
      // not JSON: keep the raw body
    }
    return `HTTP ${err.code}: ${body}`;
  }
  return String(err);
}

async function main() {
  // Strict server-side field validation: a typo in a field name is an error.
  const created = await api.createNamespacedCustomObject({
    group, version, namespace, plural, body: flock, fieldManager: 'node-client', fieldValidation: 'Strict',
  });
  console.log(`created ${created.kind} ${created.metadata.namespace}/${created.metadata.name} uid=${created.metadata.uid}`);

  const got = await api.getNamespacedCustomObject({ group, version, namespace, plural, name });
  // serviceName is defaulted by the server to the Flock's name.
  console.log(`read ${got.metadata.name} replicas=${got.spec.replicas} serviceName=${got.spec.serviceName} uid=${got.metadata.uid}`);

  const list = await api.listNamespacedCustomObject({ group, version, namespace, plural });
  console.log(`listed ${list.kind} with ${list.items.length} item(s): ${list.items.map((f) => f.metadata.name).join(',')}`);

  await api.deleteNamespacedCustomObject({ group, version, namespace, plural, name, propagationPolicy: 'Background' });
  console.log(`deleted ${namespace}/${name}`);

  // The delete is done when a read says NotFound (bounded: 60 tries, 30s).
  for (let i = 0; i < 60; i++) {
    try {
      await api.getNamespacedCustomObject({ group, version, namespace, plural, name });
    } catch (err) {
      if (err.code === 404) {
        console.log(`gone ${namespace}/${name} (HTTP 404)`);
        return;
      }
      throw err;
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  throw new Error(`${namespace}/${name} still exists 30s after the delete`);
}

main().catch((err) => {
  console.error(`node-client: ${explain(err)}`);
  process.exit(1);
});
