#!/usr/bin/env bats
# kubectl-nodegroup validate, as a tenant or a CI pipeline runs it before `kubectl apply`:
# the operator's admission rules, offline.

setup_file() {
  cd "$BATS_TEST_DIRNAME/.."
  # Built as the release builds it (internal/gobuild), so the suite tests what ships.
  go run ./hack/gobuild -o "$BATS_FILE_TMPDIR/kubectl-nodegroup" ./cmd/kubectl-nodegroup
  # The example tenant as it stands once its control plane runs: the Kamaji provider has
  # published the API server's address, which Cluster API copies onto the Cluster.
  sed 's/^  clusterNetwork:/  controlPlaneEndpoint: {host: demo.tenant-demo.svc, port: 6443}\n  clusterNetwork:/' \
    examples/tenant.yaml > "$BATS_FILE_TMPDIR/tenant.yaml"
}

setup() {
  cd "$BATS_TEST_DIRNAME"
  export PATH="$BATS_FILE_TMPDIR:$PATH"
}

@test "a Talos pool on the built-in class and location is admitted" {
  run kubectl-nodegroup validate -f testdata/pool-talos.yaml
  [ "$status" -eq 0 ]
  [[ "$output" == *"NodeGroup tenant-demo/workers is admitted"* ]]
}

@test "GPUs on a Kairos class are refused, naming the field and the fix" {
  run kubectl-nodegroup validate -f testdata/pool-kairos-gpu.yaml --class testdata/class-kairos.yaml
  [ "$status" -eq 1 ]
  [[ "$output" == *"is refused"* ]]
  [[ "$output" == *"spec.gpus"* ]]
  [[ "$output" == *"Talos class"* ]]
}

@test "a pool ahead of its control plane is refused" {
  sed 's/maxReplicas: 3/maxReplicas: 3\n  kubernetesVersion: v1.36/' testdata/pool-talos.yaml > "$BATS_TEST_TMPDIR/ahead.yaml"
  run kubectl-nodegroup validate -f "$BATS_TEST_TMPDIR/ahead.yaml" --control-plane-version v1.35.4
  [ "$status" -eq 1 ]
  [[ "$output" == *"spec.kubernetesVersion"* ]]
}

@test "a class file the API server would refuse is named with its field" {
  sed 's/@sha256:4f8c[0-9a-f]*/:v1.35.4/' testdata/class-kairos.yaml > "$BATS_TEST_TMPDIR/tagged.yaml"
  run kubectl-nodegroup validate -f testdata/pool-kairos.yaml --class "$BATS_TEST_TMPDIR/tagged.yaml"
  [ "$status" -eq 2 ]
  [[ "$output" == *'tagged.yaml: NodeGroupClass.nodegroup.io "kairos-v1-35" is invalid: spec.image.reference:'* ]]
  [[ "$output" == *"must be pinned by digest"* ]]
  run kubectl-nodegroup render -f testdata/pool-kairos.yaml --objects "$BATS_FILE_TMPDIR/tenant.yaml" \
    --objects "$BATS_TEST_TMPDIR/tagged.yaml" --apiserver-ip 10.96.12.34 --management-dns-ip 10.96.0.10
  [ "$status" -eq 2 ]
  [[ "$output" == *"render: "*'tagged.yaml: NodeGroupClass.nodegroup.io "kairos-v1-35" is invalid: spec.image.reference:'* ]]
}

@test "a location file the API server would refuse is named with its field" {
  printf 'apiVersion: nodegroup.io/v1alpha1\nkind: Location\nmetadata: {name: in-cluster}\nspec:\n  provider: {type: Proxmox, kubevirt: {}}\n' > "$BATS_TEST_TMPDIR/location.yaml"
  run kubectl-nodegroup validate -f testdata/pool-talos.yaml --location "$BATS_TEST_TMPDIR/location.yaml"
  [ "$status" -eq 2 ]
  [[ "$output" == *'location.yaml: Location.nodegroup.io "in-cluster" is invalid: spec.provider:'* ]]
  [[ "$output" == *"spec.provider.type must name the provider block that is set"* ]]
}

@test "a class the pool names must be given" {
  run kubectl-nodegroup validate -f testdata/pool-kairos-gpu.yaml
  [ "$status" -eq 2 ]
  [[ "$output" == *'names class "kairos-v1-35": pass it with --class'* ]]
}

@test "a file with several objects is refused with a clear message" {
  run kubectl-nodegroup validate -f ../examples/pools.yaml
  [ "$status" -eq 2 ]
  [[ "$output" == *"several YAML documents"* ]]
}

@test "a misspelt field is refused" {
  sed 's/maxReplicas/maxReplica/' testdata/pool-talos.yaml > "$BATS_TEST_TMPDIR/typo.yaml"
  run kubectl-nodegroup validate -f "$BATS_TEST_TMPDIR/typo.yaml"
  [ "$status" -eq 2 ]
  [[ "$output" == *'unknown field "spec.maxReplica"'* ]]
}

@test "render prints the four objects the operator would apply for a Kairos pool" {
  run kubectl-nodegroup render -f testdata/pool-kairos.yaml --objects "$BATS_FILE_TMPDIR/tenant.yaml" \
    --objects ../examples/platform.yaml --apiserver-ip 10.96.12.34 --management-dns-ip 10.96.0.10
  [ "$status" -eq 0 ]
  [ "$(grep -c '^kind:' <<<"$output")" -eq 4 ]
  [[ "$output" == *"kind: KairosConfigTemplate"* ]]
  [[ "$output" == *"distribution: kubeadm"* ]]
  [[ "$output" == *"10.96.12.34 demo demo.tenant-demo"* ]]
  [[ "$output" != *"replicas:"* ]]
}

@test "render says which condition a pool without its secrets would get" {
  run kubectl-nodegroup render -f testdata/pool-talos.yaml --objects "$BATS_FILE_TMPDIR/tenant.yaml" \
    --apiserver-ip 10.96.12.34 --management-dns-ip 10.96.0.10
  [ "$status" -eq 1 ]
  [[ "$output" == *"Rendered=False (TalosSecretsMissing)"* ]]
}

@test "render of a pool whose cluster is missing names the condition" {
  run kubectl-nodegroup render -f testdata/pool-talos.yaml
  [ "$status" -eq 1 ]
  [[ "$output" == *'ClusterFound=False (ClusterNotFound): Cluster "demo" does not exist in namespace "tenant-demo"'* ]]
}

@test "explain needs a pool name" {
  run kubectl-nodegroup explain
  [ "$status" -eq 2 ]
  [[ "$output" == *"name the pool: kubectl nodegroup explain NAME -n NAMESPACE"* ]]
}

@test "explain without a reachable cluster says so" {
  printf 'apiVersion: v1\nkind: Config\nclusters: [{name: x, cluster: {server: "https://127.0.0.1:1"}}]\ncontexts: [{name: x, context: {cluster: x, user: x}}]\nusers: [{name: x, user: {token: t}}]\ncurrent-context: x\n' > "$BATS_TEST_TMPDIR/kubeconfig"
  KUBECONFIG="$BATS_TEST_TMPDIR/kubeconfig" run kubectl-nodegroup explain web -n tenant-demo
  [ "$status" -eq 2 ]
  [[ "$output" == *"NodeGroup tenant-demo/web"* ]]
}

@test "render refuses, as the operator would, a pool on another minor than its class's image" {
  sed 's/maxReplicas: 2/maxReplicas: 2\n  kubernetesVersion: v1.34/' testdata/pool-kairos.yaml > "$BATS_TEST_TMPDIR/minor.yaml"
  run kubectl-nodegroup render -f "$BATS_TEST_TMPDIR/minor.yaml" --objects "$BATS_FILE_TMPDIR/tenant.yaml" \
    --objects ../examples/platform.yaml --apiserver-ip 10.96.12.34 --management-dns-ip 10.96.0.10
  [ "$status" -eq 1 ]
  [[ "$output" == *"the operator would refuse the pool: spec.kubernetesVersion"* ]]
  [[ "$output" == *"(class-version)"* ]]
}

@test "version names the build, completion prints a shell script" {
  run kubectl-nodegroup version
  [ "$status" -eq 0 ]
  [[ "$output" == "kubectl-nodegroup "* ]]
  run kubectl-nodegroup completion bash
  [ "$status" -eq 0 ]
  [[ "$output" == *"__start_kubectl-nodegroup"* ]]
}

@test "get without a reachable cluster says so and exits 2" {
  printf 'apiVersion: v1\nkind: Config\nclusters: [{name: x, cluster: {server: "https://127.0.0.1:1"}}]\ncontexts: [{name: x, context: {cluster: x, user: x, namespace: tenant-demo}}]\nusers: [{name: x, user: {token: t}}]\ncurrent-context: x\n' > "$BATS_TEST_TMPDIR/kubeconfig"
  run kubectl-nodegroup get --kubeconfig "$BATS_TEST_TMPDIR/kubeconfig" --request-timeout 5s
  [ "$status" -eq 2 ]
  [[ "$output" == *"get:"*"127.0.0.1:1"* ]]
}

@test "--context picks a context other than the current one" {
  printf 'apiVersion: v1\nkind: Config\nclusters: [{name: one, cluster: {server: "https://127.0.0.1:1"}}, {name: two, cluster: {server: "https://127.0.0.1:2"}}]\ncontexts: [{name: one, context: {cluster: one, user: u, namespace: a}}, {name: two, context: {cluster: two, user: u, namespace: b}}]\nusers: [{name: u, user: {token: t}}]\ncurrent-context: one\n' > "$BATS_TEST_TMPDIR/kubeconfig"
  run kubectl-nodegroup explain web --kubeconfig "$BATS_TEST_TMPDIR/kubeconfig" --request-timeout 5s
  [ "$status" -eq 2 ]
  [[ "$output" == *"NodeGroup a/web"*"127.0.0.1:1"* ]]
  run kubectl-nodegroup explain web --kubeconfig "$BATS_TEST_TMPDIR/kubeconfig" --context two --request-timeout 5s
  [ "$status" -eq 2 ]
  [[ "$output" == *"NodeGroup b/web"*"127.0.0.1:2"* ]]
  [[ "$output" != *"127.0.0.1:1"* ]]
}

@test "render puts a pool that names no namespace in the namespace of --context" {
  sed '/^  namespace:/d' testdata/pool-kairos.yaml > "$BATS_TEST_TMPDIR/pool.yaml"
  printf 'apiVersion: v1\nkind: Config\nclusters: [{name: one, cluster: {server: "https://127.0.0.1:1"}}]\ncontexts: [{name: one, context: {cluster: one, user: u, namespace: elsewhere}}, {name: tenant, context: {cluster: one, user: u, namespace: tenant-demo}}]\nusers: [{name: u, user: {token: t}}]\ncurrent-context: one\n' > "$BATS_TEST_TMPDIR/kubeconfig"
  args=(-f "$BATS_TEST_TMPDIR/pool.yaml" --objects "$BATS_FILE_TMPDIR/tenant.yaml" --objects ../examples/platform.yaml
    --apiserver-ip 10.96.12.34 --management-dns-ip 10.96.0.10 --kubeconfig "$BATS_TEST_TMPDIR/kubeconfig")
  run kubectl-nodegroup render "${args[@]}"
  [ "$status" -eq 1 ]
  [[ "$output" == *'Cluster "demo" does not exist in namespace "elsewhere"'* ]]
  run kubectl-nodegroup render "${args[@]}" --context tenant -o yaml
  [ "$status" -eq 0 ]
  [ "$(grep -c '^kind:' <<<"$output")" -eq 4 ]
  [ "$(grep -c '^  namespace: tenant-demo$' <<<"$output")" -eq 4 ]
}

@test "render -o wide prints a table of the objects, -o name their names" {
  args=(-f testdata/pool-kairos.yaml --objects "$BATS_FILE_TMPDIR/tenant.yaml" --objects ../examples/platform.yaml
    --apiserver-ip 10.96.12.34 --management-dns-ip 10.96.0.10)
  run kubectl-nodegroup render "${args[@]}" -o wide
  [ "$status" -eq 0 ]
  [[ "${lines[0]}" == "NAME"*"KIND"*"API VERSION" ]]
  [[ "$output" =~ demo-kairos\ +MachineDeployment\ +cluster.x-k8s.io/v1beta2 ]]
  [ "${#lines[@]}" -eq 5 ]
  run kubectl-nodegroup render "${args[@]}" -o name
  [ "$status" -eq 0 ]
  [[ "$output" == *"machinedeployment.cluster.x-k8s.io/demo-kairos"* ]]
}
