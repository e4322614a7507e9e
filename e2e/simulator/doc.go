// Package simulator is a SIMULATOR of the Cluster API providers a pool needs, for the
// end-to-end tests only. It never runs in production and must not be mistaken for one of
// the providers it stands in for.
//
// The e2e suite runs the real Cluster API core manager against one API server that is
// both the management and the workload cluster, with no VMs and no provider
// controllers. Add registers controllers that play, against that API server:
//
//   - the Talos bootstrap provider (CABPT v0.6, TalosConfig v1alpha3, v1beta1 contract)
//     and the Kairos bootstrap provider (KairosConfig v1beta2, v1beta2 contract): once the
//     owning Machine exists, the data Secret (named after the config, type
//     cluster.x-k8s.io/secret, key "value") and the config's status;
//   - CAPK (KubevirtMachine v1alpha1, v1beta1 contract): once the Machine has its
//     bootstrap data, spec.providerID kubevirt://<name> and status.ready;
//   - the cluster level: KubevirtCluster status.ready, the KamajiControlPlane status that
//     Cluster API reads as an initialized, available, stable control plane at
//     spec.version, and the <cluster>-kubeconfig Secret (Options.Kubeconfig);
//   - the worker's kubelet: a Node for each Machine whose infrastructure is ready, built
//     from the bootstrap data Secret as a kubelet would read it, so that a rendering bug
//     shows up as a wrong or missing Node.
//
// What it fakes, and how the real thing differs:
//
//   - No VM, no disk import, no boot. The infrastructure machine is ready as soon as the
//     Machine has bootstrap data; the VM's size is read only to fill the Node's capacity.
//     No addresses are reported.
//   - The Node is created by the simulator, not registered by a kubelet after a join. It
//     is created once per infrastructure machine (recorded in the annotation
//     AnnotationSimulatedNode): a Node deleted afterwards stays deleted, as a lost
//     worker would, and no Node is created for a Machine being deleted. kwok (selecting
//     AnnotationKwok=fake) keeps it Ready and heartbeating; the simulator only writes its
//     initial status.
//   - Talos: the data Secret holds spec.data byte for byte. CABPT decodes and re-encodes
//     it through the Talos machinery (same document, other bytes). Only generateType
//     "none" is simulated; configPatches, strategicPatches and hostname are refused. The
//     Node side loads the document with the Talos machinery (unknown fields fail) and
//     validates it as a Talos node would; Node labels come from machine.nodeLabels and the
//     kubelet's --node-labels, taints from machine.nodeTaints, --register-with-taints and
//     extraConfig.registerWithTaints, the kubelet version from the tag of
//     machine.kubelet.image (the Machine's version when the image has no tag), the Node
//     name from machine.network.hostname or the VM name.
//   - Kairos: the data Secret is a reduced cloud-config (hostname, users without a
//     password, DNS, write_files from spec.files, and the kubeadm JoinConfiguration
//     from spec.kubeadm in cluster.config). Like the provider it sets
//     nodeRegistration.name to the Machine's name unless given and adds the
//     node.cluster.x-k8s.io/uninitialized:NoSchedule taint (Cluster API removes it once
//     it links the Node). It mints no bootstrap token and writes no discovery block or
//     providerID patch. The kubelet version is the Machine's version (the real join
//     refuses a disk whose kubeadm differs; the simulator cannot see the disk), the Node
//     name nodeRegistration.name, labels and taints those of kubeletExtraArgs
//     node-labels and register-with-taints, nodeRegistration.taints and
//     kubeletconfiguration patches written into the patches directory.
//   - Every Node also carries the labels a kubelet sets itself (hostname, and os/arch as
//     linux/amd64). The API server's TaintNodesByCondition admission adds
//     node.kubernetes.io/not-ready, which kube-controller-manager removes once the Node
//     is Ready, as for a real Node.
//   - The simulated kubelet refuses what a real one refuses at start: --node-labels in
//     the kubernetes.io and k8s.io domains other than the kubelet's own, and
//     --register-with-taints entries without an effect. The API server refuses invalid
//     label keys or values and taint effects. A refused Node is reported by a Warning
//     event on the Machine (reason KubeletRefused or NodeRefused) and in the log, and is
//     not retried on a timer; a config the simulated provider cannot handle likewise
//     (BootstrapDataRefused).
//   - Capacity is the VM's vCPUs and memory (none for an instancetype), pods the
//     kubelet configuration's maxPods; allocatable subtracts kubeReserved,
//     systemReserved and, for memory, evictionHard memory.available, as the kubelet does.
//   - Bootstrap configs do not wait for the cluster's infrastructure or control plane,
//     and the Kairos kubeconfig checks (owner, endpoint, CA) are not made.
//   - The control plane is the API server itself: its status claims every replica ready,
//     its version follows spec.version at once, and its endpoint (when the Cluster has
//     none) is the kubeconfig's server.
//   - The simulator adds no finalizers, so it never blocks a deletion.
package simulator
