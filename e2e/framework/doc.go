// Package framework starts the end-to-end environment the e2e suites run against, all on
// loopback and all real except the machines:
//
//   - the management cluster: etcd and kube-apiserver (hack/testbin.sh), with this
//     project's CRDs and the upstream provider CRDs, the Cluster API ones wired to the
//     manager's conversion webhook, and a kube-controller-manager (garbage collection);
//   - the Cluster API core manager (hack/e2ebin.sh) with its admission and conversion
//     webhooks served on loopback under a certificate this package issues;
//   - the tenant cluster (Env.Tenant, StartTenant): a second etcd and kube-apiserver
//     with a CA of its own, bootstrap-token authentication, the Node and RBAC
//     authorizers and NodeRestriction admission, its own kube-controller-manager (which
//     approves and signs the kubelets' CSRs with the tenant CA, signs cluster-info,
//     cleans expired tokens, and runs node lifecycle), kube-scheduler, and kwok, which
//     keeps the simulated Nodes Ready. Nodes join it through a real TLS bootstrap;
//     Cluster API and the operator reach it only through <cluster>-kubeconfig. A
//     scenario may start more tenants (NewTenant) and assign one to a namespace
//     (UseTenant), and stop and start a tenant's API server;
//   - the platform chart, rendered with the Helm SDK and applied but for its
//     Deployment, and the operator binary run with that Deployment's arguments and
//     environment (internal/localrun) as the chart's ServiceAccount, its webhook called
//     on loopback under the certificate it issues itself;
//   - the provider simulator (e2e/simulator), standing in for the Talos, Kairos, KubeVirt
//     and Kamaji controllers and for the workers' OS and kubelet, which would need real
//     virtual machines.
//
// Every process logs into the environment's work folder; a failed scenario names it.
package framework
