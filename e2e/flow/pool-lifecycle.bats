#!/usr/bin/env bats
# A pool's life as the people involved type it, against the end-to-end environment
# (e2e/framework: a real kube-apiserver, the Cluster API manager, the operator binary and
# the provider simulator). The tests run in order and build on each other.
#
# Run with `make e2e` (or `bats e2e/flow` once hack/e2ebin.sh has built the binaries).

setup_file() {
  cd "$BATS_TEST_DIRNAME/../.."
  # The plugin as the release builds it, so the suite tests what ships; envctl is a
  # test tool (the operator it runs is built the release's way too, by localrun).
  go run ./hack/gobuild -o "$BATS_FILE_TMPDIR/kubectl-nodegroup" ./cmd/kubectl-nodegroup
  go build -o "$BATS_FILE_TMPDIR/" ./e2e/envctl
  # fd 3 closed: bats waits for every holder of it before it ends.
  "$BATS_FILE_TMPDIR/envctl" -work "$BATS_FILE_TMPDIR/env" 2>"$BATS_FILE_TMPDIR/envctl.log" 3>&- &
  echo $! >"$BATS_FILE_TMPDIR/envctl.pid"
  for _ in $(seq 1 600); do
    [ -f "$BATS_FILE_TMPDIR/env/env" ] && return 0
    kill -0 "$(cat "$BATS_FILE_TMPDIR/envctl.pid")" 2>/dev/null || break
    sleep 1
  done
  echo "the e2e environment did not come up:" >&3
  tail -30 "$BATS_FILE_TMPDIR/envctl.log" >&3
  return 1
}

teardown_file() {
  # envctl stops every process it started on SIGTERM.
  pid=$(cat "$BATS_FILE_TMPDIR/envctl.pid")
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

setup() {
  cd "$BATS_TEST_DIRNAME/../.."
  # shellcheck disable=SC1091
  source "$BATS_FILE_TMPDIR/env/env"
  export PATH="$BATS_FILE_TMPDIR:$PATH"
}

@test "the platform prepares a tenant: its cluster and control plane, nothing else" {
  # The platform's own objects: a Kairos class and a location.
  kubectl apply -f examples/platform.yaml
  kubectl apply -f examples/tenant.yaml
  # What a real cluster and Kamaji would have made: the management DNS Service and the
  # tenant API server's Service (this environment runs neither).
  kubectl apply -f hack/demo/stand-ins.yaml
  run kubectl get nodegroupclasses
  [ "$status" -eq 0 ]
  [[ "$output" == *talos* ]]
}

@test "a tenant checks the pool offline before applying it" {
  run kubectl-nodegroup validate -f e2e/flow/testdata/web.yaml
  [ "$status" -eq 0 ]
  [[ "$output" == *"is admitted"* ]]
}

@test "the pool becomes a Machine and a Ready Node with its labels and taint" {
  kubectl apply -f e2e/flow/testdata/web.yaml
  kubectl wait -n tenant-demo nodegroup/web --for=condition=Ready --timeout=240s || {
    kubectl describe -n tenant-demo nodegroup/web; false; }
  run kubectl get machines -n tenant-demo -l cluster.x-k8s.io/deployment-name=demo-web \
    -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}'
  [ "$output" = "Running" ]
  # The Node is in the tenant cluster, which the worker joined with its bootstrap token.
  run kubectl --kubeconfig "$TENANT_KUBECONFIG" get nodes -l node.cluster.x-k8s.io/nodegroup=web,workload=web,node-role.kubernetes.io/worker \
    -o jsonpath='{range .items[*]}{.spec.taints[?(@.key=="workload")].effect}{"\n"}{end}'
  [ "$output" = "NoSchedule" ]
}

@test "the operator made the cluster's Talos join identity and keeps its token in the tenant" {
  run kubectl get secret -n tenant-demo demo-talos -o jsonpath='{.metadata.labels.app\.kubernetes\.io/managed-by}'
  [ "$output" = nodegroup-operator ]
  id=$(kubectl get secret -n tenant-demo demo-talos -o jsonpath='{.data.bootstrap-token}' | base64 -d | cut -d. -f1)
  run kubectl --kubeconfig "$TENANT_KUBECONFIG" get secret -n kube-system "bootstrap-token-$id" -o jsonpath='{.type}'
  [ "$output" = bootstrap.kubernetes.io/token ]
  run kubectl get nodegroup -n tenant-demo web -o jsonpath='{.status.conditions[?(@.type=="TenantClusterReachable")].status}'
  [ "$output" = True ]
}

@test "kubectl nodegroup explain tells the tenant where the pool stands" {
  run kubectl-nodegroup explain web -n tenant-demo
  [ "$status" -eq 0 ]
  [[ "$output" == *demo-web* ]]
  [[ "$output" == *"The pool is ready"* ]]
}

@test "a tenant with the view role reads the pool with kubectl's flags" {
  # The tenant's identity: a ServiceAccount bound in its namespace to the chart's view role.
  kubectl create serviceaccount -n tenant-demo viewer
  kubectl create rolebinding -n tenant-demo viewer --clusterrole nodegroup-operator-tenant-view --serviceaccount tenant-demo:viewer
  # A kubeconfig with two contexts on the management cluster, both in tenant-demo: admin
  # (the current one, the admin's credentials) and tenant (the ServiceAccount's token).
  kc="$BATS_FILE_TMPDIR/contexts.kubeconfig"
  kubectl config view --raw --minify >"$kc"
  current=$(kubectl --kubeconfig "$kc" config current-context)
  cluster=$(kubectl --kubeconfig "$kc" config view -o jsonpath='{.contexts[0].context.cluster}')
  [ "$current" = admin ] || kubectl --kubeconfig "$kc" config rename-context "$current" admin
  kubectl --kubeconfig "$kc" config set-context admin --namespace tenant-demo
  kubectl --kubeconfig "$kc" config set-credentials tenant --token "$(kubectl create token -n tenant-demo viewer --duration 1h)"
  kubectl --kubeconfig "$kc" config set-context tenant --cluster "$cluster" --user tenant --namespace tenant-demo
  run kubectl --kubeconfig "$kc" --context tenant auth can-i patch nodegroups/web
  [ "$output" = no ]

  # explain reads only the pool, which the view role grants (once the binding reaches
  # the authorizer's cache).
  for _ in $(seq 1 30); do
    run kubectl-nodegroup explain web --kubeconfig "$kc" --context tenant
    [ "$status" -eq 0 ] && break
    sleep 1
  done
  [ "$status" -eq 0 ]
  [[ "$output" == *demo-web* ]]
  [[ "$output" == *"The pool is ready"* ]]

  run kubectl-nodegroup get --kubeconfig "$kc" --context tenant -o yaml
  [ "$status" -eq 0 ]
  [[ "$output" == *"kind: NodeGroup"* ]]
  [[ "$output" == *"name: web"* ]]
  [[ "$output" == *"ready: 1/1"* ]]

  # --context, not the current context: a copy of the kubeconfig whose current context
  # names an API server that is not there. The plugin goes where the current context
  # says, unless --context names another.
  wrong="$BATS_FILE_TMPDIR/wrong-current.kubeconfig"
  cp "$kc" "$wrong"
  kubectl --kubeconfig "$wrong" config set-cluster nowhere --server https://127.0.0.1:1 --insecure-skip-tls-verify
  kubectl --kubeconfig "$wrong" config set-context nowhere --cluster nowhere --user tenant --namespace tenant-demo
  kubectl --kubeconfig "$wrong" config use-context nowhere
  run kubectl-nodegroup explain web --kubeconfig "$wrong" --request-timeout 5s
  [ "$status" -eq 2 ]
  [[ "$output" == *"127.0.0.1:1"* ]]
  run kubectl-nodegroup explain web --kubeconfig "$wrong" --context tenant
  [ "$status" -eq 0 ]
  [[ "$output" == *"NodeGroup tenant-demo/web"* ]]
  [[ "$output" == *"The pool is ready"* ]]
  run kubectl-nodegroup get web --kubeconfig "$wrong" --context tenant -o yaml
  [ "$status" -eq 0 ]
  [[ "$output" == *"name: web"* ]]
  [[ "$output" == *"namespace: tenant-demo"* ]]
  [[ "$output" == *"ready: 1/1"* ]]
  # The current context is still admin in the kubeconfig the tenant step wrote.
  [ "$(kubectl --kubeconfig "$kc" config current-context)" = admin ]

  # The current context's namespace when no -n: the CRD's columns, READY as ready/wanted
  # and the STATUS after it.
  run kubectl-nodegroup get --kubeconfig "$kc"
  [ "$status" -eq 0 ]
  echo "$output"
  [[ "$(echo "$output" | head -1)" == *" READY "*" STATUS "* ]]
  row=$(echo "$output" | awk '$1 == "web" { $1 = $1; print }')
  [[ " $row " == *" 1/1 Ready "* ]]
}

@test "resizing the fixed pool adds a machine" {
  kubectl patch -n tenant-demo nodegroup/web --type merge -p '{"spec":{"minReplicas":2,"maxReplicas":2}}'
  for _ in $(seq 1 120); do
    n=$(kubectl --kubeconfig "$TENANT_KUBECONFIG" get nodes -l node.cluster.x-k8s.io/nodegroup=web -o name | wc -l)
    [ "$n" -eq 2 ] && break
    sleep 2
  done
  [ "$n" -eq 2 ]
  for _ in $(seq 1 60); do
    ready=$(kubectl get nodegroup -n tenant-demo web -o jsonpath='{.status.readyReplicas}')
    [ "$ready" = 2 ] && break
    sleep 2
  done
  [ "$ready" = 2 ]
  kubectl wait -n tenant-demo nodegroup/web --for=condition=Ready --timeout=60s
}

@test "switching the running pool to Kairos is refused, and it keeps running" {
  run kubectl patch -n tenant-demo nodegroup/web --type merge -p '{"spec":{"nodeGroupClassName":"kairos"}}'
  [ "$status" -ne 0 ]
  [[ "$output" == *denied* ]]
  # The pool still names the built-in talos class (the default: web.yaml names none).
  run kubectl get nodegroup -n tenant-demo web -o jsonpath='{.spec.nodeGroupClassName}'
  [ "$status" -eq 0 ]
  [ "$output" = talos ]
  run kubectl get machines -n tenant-demo -l cluster.x-k8s.io/deployment-name=demo-web -o name
  [ "$(echo "$output" | wc -l)" -eq 2 ]
}

@test "deleting the pool removes its machines and nodes" {
  kubectl delete -n tenant-demo nodegroup/web --timeout=240s
  for _ in $(seq 1 120); do
    n=$(kubectl --kubeconfig "$TENANT_KUBECONFIG" get nodes -l node.cluster.x-k8s.io/nodegroup=web -o name | wc -l)
    m=$(kubectl get machines -n tenant-demo -o name | wc -l)
    [ "$n" -eq 0 ] && [ "$m" -eq 0 ] && break
    sleep 2
  done
  [ "$n" -eq 0 ]
  [ "$m" -eq 0 ]
  run kubectl get machinedeployments -n tenant-demo -o name
  [ -z "$output" ]
  # The tenant's cluster stays.
  kubectl get -n tenant-demo cluster/demo
}
