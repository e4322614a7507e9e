// Package simulator is a SIMULATOR of the Cluster API providers a pool needs, and of the
// worker machines' OS and kubelet, for the end-to-end tests only. It never runs in
// production and must not be mistaken for one of the components it stands in for.
//
// The e2e suite runs the real Cluster API core manager and the operator against a
// management API server, and each Cluster's workload cluster is a separate tenant API
// server (e2e/framework's Tenant: its own etcd, CA, bootstrap-token authentication, the
// Node and RBAC authorizers, NodeRestriction admission, and a kube-controller-manager
// that approves and signs kubelet CSRs with the tenant CA). There are no VMs and no
// provider controllers. Add registers controllers, run as the management cluster's
// admin, that play what needs a VM or a provider, and nothing the product must do:
//
//   - Kamaji, for a KamajiControlPlane: the tenant control plane is the API server
//     Options.Tenants names for the Cluster. As Kamaji's kubeadm phases do, it sets up in
//     the tenant what joins need: kubeadm's bootstrapper RBAC (bootstrap tokens of the
//     group system:bootstrappers:kubeadm:default-node-token may post node CSRs and get
//     Nodes, and their CSRs are auto-approved; Nodes renew their own) and
//     kube-public/cluster-info with the tenant's server and CA, readable anonymously,
//     which the tenant's bootstrapsigner signs with every signing token. As the Kamaji
//     control-plane provider does, it writes <cluster>-kubeconfig (the tenant's admin
//     kubeconfig under "value") and <cluster>-ca (the tenant CA, tls.crt and tls.key),
//     both cluster.x-k8s.io/secret with Kamaji's labels and controlled by the
//     KamajiControlPlane; sets the control-plane endpoint (the Cluster's own, else the
//     tenant API server's) on the KamajiControlPlane, from which Cluster API copies it
//     to the Cluster, and on the KubevirtCluster; and reports the control plane
//     initialized, available and stable at spec.version once the tenant answers.
//   - The Talos bootstrap provider (CABPT v0.6, TalosConfig v1alpha3, v1beta1 contract)
//     and the Kairos bootstrap provider (KairosConfig v1beta2, v1beta2 contract): once the
//     owning Machine exists, the data Secret (named after the config, type
//     cluster.x-k8s.io/secret, key "value") and the config's status.
//   - CAPK (KubevirtMachine v1alpha1, v1beta1 contract): once the Machine has its
//     bootstrap data, spec.providerID kubevirt://<name> and status.ready; then, as
//     CAPK's updateNodeProviderID does (KubeVirt has no cloud provider to tell a kubelet
//     its providerID), it patches that providerID onto the tenant's Node named after the
//     KubevirtMachine, through <cluster>-kubeconfig, and sets status.nodeupdated. Until
//     then the Node has no providerID and Cluster API cannot link it to its Machine.
//   - capmox (v0.9, ProxmoxCluster and ProxmoxMachine v1alpha2): a ProxmoxCluster is
//     provisioned once its credentials Secret logs in to one of Options.ProxmoxSites
//     (URL, token and secret equal); a ProxmoxMachine, once its Machine has bootstrap
//     data and its cluster is provisioned, gets spec.providerID proxmox://<uuid> (the
//     VM's SMBIOS UUID: the object's UID) and its provisioned status, and the site its VM
//     was made at (AnnotationProxmoxSite). Its Talos Node registers with that system UUID
//     and no providerID, as Talos on Proxmox does: linking it is the operator's job.
//     There is no Proxmox API, VM template, IPAM (no InClusterIPPool, no address), owner
//     reference or finalizer on the credentials Secret.
//   - The worker's OS and kubelet: for each Machine whose infrastructure is ready, the
//     bootstrap data is read as the OS would read it, the kubelet joins the tenant
//     through a TLS bootstrap, and registers its Node with its own certificate, so that
//     a rendering bug, or a wrong join identity, shows up as a wrong or missing Node.
//
// The join, as it happens on a real machine:
//
//   - Talos: the kubelet's bootstrap credentials are cluster.token, cluster.ca (with
//     cluster.acceptedCAs) and cluster.controlPlane.endpoint of the machine config,
//     as Talos writes them into the kubelet's bootstrap kubeconfig.
//   - Kairos (kubeadm join): kubeadm's bootstrap-token discovery: cluster-info is read
//     without trusting the server, its JWS signature for the token is checked, its CA
//     must match a caCertHashes pin, and it is read again trusting that CA; the kubelet
//     then bootstraps with the token against the server cluster-info names. While the
//     tenant's bootstrapsigner has not yet signed cluster-info for a new token, the join
//     waits quietly for up to 30 s, as kubeadm retries.
//   - Then, for both: authenticated by the bootstrap token, the kubelet posts a CSR for
//     system:node:<node name> in system:nodes (signer kubernetes.io/kube-apiserver-client-kubelet,
//     client k8s.io/client-go/util/certificate/csr, an ECDSA key kept across its
//     retries) and waits for the tenant's csrapproving and csrsigning controllers to
//     approve and sign it; with that certificate it creates its Node with its initial
//     status and no providerID, under the Node authorizer and NodeRestriction.
//     Talos's machine.nodeLabels, nodeTaints and nodeAnnotations are then patched onto
//     the Node with the same identity, as Talos does, so NodeRestriction refuses what a
//     kubelet may not set (node-role labels, say, or any change of its taints).
//   - A join the tenant refuses (an unknown or expired token: 401; a CA that is not the
//     tenant's: the TLS handshake fails; a CSR denied, failed or unsigned for a minute)
//     is reported by a Warning event JoinFailed on the Machine and retried with backoff
//     (1 s doubling to 30 s), as a kubelet retries; no Node appears.
//
// The Kairos provider's own token: as CABPK does, the simulated Kairos provider mints a
// bootstrap token in the tenant's kube-system through <cluster>-kubeconfig (usages
// signing and authentication, kubeadm's node group, 15 minutes, pushed back while its
// Machine has no Node, and kept in the data Secret so a reconcile reuses it), and writes
// the discovery block itself: that token, the Cluster's endpoint and the pin of the CA in
// <cluster>-ca. It waits for the Cluster's endpoint and for both Secrets to be controlled
// by the Cluster's control plane. The Talos pools use the token the operator keeps in
// the tenant (<cluster>-talos).
//
// What is still faked, and how the real thing differs:
//
//   - No VM, no disk import, no boot, no OS. The infrastructure machine is ready as soon
//     as the Machine has bootstrap data; the VM's size is read only to fill the Node's
//     capacity. No addresses are reported but the Node's hostname.
//   - No kubelet process: the simulator makes the kubelet's API calls up to the Node's
//     registration (the CSR, the Node with its initial status) and nothing after them.
//     kwok (selecting AnnotationKwok=fake, which the simulated kubelet registers the
//     Node with) keeps it Ready and heartbeating and runs the Pods bound to it, with the
//     tenant's admin credentials. There is no kubelet serving certificate (no kubelet-serving CSR: logs
//     and exec do not work), no client certificate rotation, no kube-proxy or CNI.
//   - A Node is registered once per infrastructure machine (recorded in the annotation
//     AnnotationSimulatedNode): a Node deleted afterwards stays deleted, as a lost
//     worker's would, and no Node is registered for a Machine being deleted.
//   - Talos: the data Secret holds spec.data byte for byte. CABPT decodes and re-encodes
//     it through the Talos machinery (same document, other bytes). Only generateType
//     "none" is simulated; configPatches, strategicPatches and hostname are refused. The
//     OS side loads the document with the Talos machinery (unknown fields fail) and
//     validates it as a Talos node would; Node labels come from the kubelet's
//     --node-labels (then machine.nodeLabels, as above), taints from
//     --register-with-taints and extraConfig.registerWithTaints (then
//     machine.nodeTaints), the kubelet version from the tag of machine.kubelet.image
//     (the Machine's version when the image has no tag), the Node name from
//     machine.network.hostname or the VM name. trustd, apid and the machine token are
//     not used.
//   - Kairos: the data Secret is a reduced cloud-config (hostname, users without a
//     password, DNS, write_files from spec.files, and the kubeadm configuration with
//     the JoinConfiguration from spec.kubeadm in cluster.config). Like the provider it
//     sets nodeRegistration.name to the Machine's name unless given and adds the
//     node.cluster.x-k8s.io/uninitialized:NoSchedule taint (Cluster API removes it once
//     it links the Node). The kubelet version is the Machine's version (the real join
//     refuses a disk whose kubeadm differs; the simulator cannot see the disk), the Node
//     name nodeRegistration.name, labels and taints those of kubeletExtraArgs
//     node-labels and register-with-taints, nodeRegistration.taints and
//     kubeletconfiguration patches written into the patches directory. kubeadm join's
//     other reads (kube-system/kubeadm-config and kubelet-config, which Kamaji would
//     have made) and its preflight checks are not made.
//   - Every Node also carries the labels a kubelet sets itself (hostname, and os/arch as
//     linux/amd64). The tenant API server's TaintNodesByCondition admission adds
//     node.kubernetes.io/not-ready, which the tenant's node lifecycle controller removes
//     once the Node is Ready (when it runs), as for a real Node.
//   - The simulated OS and kubelet refuse what real ones refuse at start: a machine
//     config Talos would not apply or that lacks its join credentials, --node-labels in
//     the kubernetes.io and k8s.io domains other than the kubelet's own, and
//     --register-with-taints entries without an effect (Warning event KubeletRefused;
//     it never joins). The tenant API server refuses invalid label keys or values and
//     taint effects, and NodeRestriction what a kubelet may not set (Warning event
//     NodeRefused: for the Node's creation, no Node; for the OS's labels, taints or
//     annotations, the Node without them). These are not retried on a timer; a config the
//     simulated provider cannot handle likewise (BootstrapDataRefused).
//   - Capacity is the VM's vCPUs and memory (none for an instancetype), pods the
//     kubelet configuration's maxPods, and nvidia.com/gpu as many as the VM's host
//     devices from nvidia.com (what NVIDIA's device plugin advertises once it runs on
//     the node; the simulator has it at registration); allocatable subtracts kubeReserved,
//     systemReserved and, for memory, evictionHard memory.available, as the kubelet does.
//   - The Talos bootstrap config does not wait for the cluster's infrastructure or
//     control plane.
//   - Kamaji runs no TenantControlPlane: the tenant API server, its certificates and its
//     admin kubeconfig are the framework's, started before any Cluster exists, with one
//     replica whatever spec.replicas says; the KamajiControlPlane's status claims every
//     replica ready, and its version follows spec.version at once, unless the test
//     keeps AnnotationUpgradeInProgress on it: an upgrade then lasts until it goes.
//     Kamaji's addons (CoreDNS, kube-proxy, konnectivity) are not installed.
//   - The simulator adds no finalizers, so it never blocks a deletion.
package simulator
