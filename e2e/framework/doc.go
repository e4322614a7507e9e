// Package framework starts the end-to-end environment the e2e suites run against, all on
// loopback and all real except the machines:
//
//   - etcd and kube-apiserver (hack/testbin.sh), with this project's CRDs and the
//     upstream provider CRDs, the Cluster API ones wired to the manager's conversion
//     webhook;
//   - kube-controller-manager (garbage collection, node lifecycle) and kube-scheduler;
//   - the Cluster API core manager (hack/e2ebin.sh) with its admission and conversion
//     webhooks served on loopback under a certificate this package issues;
//   - kwok, which keeps the simulated Nodes Ready;
//   - the platform chart, rendered with the Helm SDK and applied but for its
//     Deployment, and the operator binary run with that Deployment's arguments and
//     environment (internal/localrun) as the chart's ServiceAccount, its webhook called
//     on loopback under the certificate it issues itself;
//   - the provider simulator (e2e/simulator), standing in for the Talos, Kairos, KubeVirt
//     and Kamaji controllers that would need real virtual machines.
//
// Every process logs into the environment's work folder; a failed scenario names it.
package framework
