package offline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/nodegroup-io/nodegroup-operator/internal/offline"
	"github.com/nodegroup-io/nodegroup-operator/internal/offline/customresource"
	"github.com/nodegroup-io/nodegroup-operator/internal/policy"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
	"github.com/nodegroup-io/nodegroup-operator/internal/render"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/scheme"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// The whole render, fuzzed: a pool, its class and its location built from the fuzzer's
// values, kept only when the API server would admit them (the chart's CRDs, offline),
// read, resolved, judged and rendered as `kubectl nodegroup render` does. Nothing may
// panic; what render writes must be admitted by the upstream providers' CRDs (schema,
// defaults, rules) and, for Talos, be loaded by Talos' own strict loader; and the same
// pool must render the same objects twice.

const (
	fuzzNamespace = "tenant-fuzz"
	fuzzClass     = "fuzz-class"
	fuzzLocation  = "fuzz-location"
)

// fuzzCluster is the tenant's objects (its Cluster, control plane, Services, Talos
// secrets, an instancetype), written once per process to a file the plugin would be given.
var fuzzCluster = sync.OnceValues(func() (offline.ClusterFiles, error) {
	once, objs, err := testenv.TenantObjects(fuzzNamespace, testenv.TenantOptions{TalosSecret: true})
	if err != nil {
		return offline.ClusterFiles{}, err
	}
	s := scheme.New()
	var docs [][]byte
	for _, obj := range append(once, objs...) {
		u, err := toUnstructured(s, obj)
		if err != nil {
			return offline.ClusterFiles{}, err
		}
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return offline.ClusterFiles{}, err
		}
		docs = append(docs, b)
	}
	docs = append(docs, []byte(`apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata: {name: u1.medium}
spec: {cpu: {guest: 2}, memory: {guest: 4Gi}}
`))
	dir, err := os.MkdirTemp("", "nodegroup-fuzz-render")
	if err != nil {
		return offline.ClusterFiles{}, err
	}
	file := filepath.Join(dir, "objects.yaml")
	if err := os.WriteFile(file, bytes.Join(docs, []byte("---\n")), 0o600); err != nil {
		return offline.ClusterFiles{}, err
	}
	return offline.ClusterFiles{Files: []string{file}, APIServerIP: "10.96.12.34", ManagementDNSIP: "10.96.0.10"}, nil
})

// upstreamKinds are the upstream providers' CRDs, every served version, ready to
// validate objects offline as their API server would.
var upstreamKinds = sync.OnceValues(func() (map[schema.GroupVersionKind]*customresource.Kind, error) {
	crds, err := testenv.ProviderCRDs()
	if err != nil {
		return nil, err
	}
	kinds := map[schema.GroupVersionKind]*customresource.Kind{}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			k, err := customresource.FromCRD(crd, v.Name)
			if err != nil {
				return nil, err
			}
			kinds[k.GroupVersionKind()] = k
		}
	}
	return kinds, nil
})

func toUnstructured(s *runtime.Scheme, obj client.Object) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(obj, s)
	if err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// watchdog kills the process when what it watches has not returned (called the function
// it returns) within 10 seconds. An input that hangs would hang the operator's worker or
// the plugin, and the fuzzer sees no failure in a call that never returns; when the
// process dies, it keeps the input.
func watchdog(what string) (stop func()) {
	t := time.AfterFunc(10*time.Second, func() { panic(what + " took more than 10s") })
	return func() { t.Stop() }
}

// fuzzPool is what the fuzzer varies: the tenant's pool and the platform's class and
// location, as strings and numbers set into the objects' fields.
type fuzzPool struct {
	// flags chooses optional parts: see build.
	flags                         uint32
	minReplicas, maxReplicas      int32
	cpu, memory, instanceType     string
	ephemeralStorage, roles       string
	labelKey, labelValue          string
	taintKey, taintValue, effect  string
	kubernetesVersion, osImage    string
	kernelModule, gpuDevice       string
	gpuCount                      int32
	sysctlKey, sysctlValue        string
	maxSurge, maxUnhealthy        string
	nodeStartupTimeout, threshold string
	classString, classVersion     string
	zone, region, storageClass    string
}

// intOrString is s as a number when it is one, as a tenant would write it in YAML.
func intOrString(s string) any {
	if n, err := strconv.ParseInt(s, 10, 32); err == nil {
		return n
	}
	return s
}

// build writes the pool, class and location as files.
func (p fuzzPool) build() (pool, class, location []byte) {
	on := func(bit uint) bool { return p.flags&(1<<bit) != 0 }
	spec := map[string]any{"clusterName": testenv.TenantCluster, "minReplicas": p.minReplicas, "maxReplicas": p.maxReplicas}
	if on(0) {
		spec["instanceType"] = p.instanceType
	} else {
		spec["resources"] = map[string]any{"cpu": p.cpu, "memory": p.memory}
	}
	set := func(bit uint, key string, value any) {
		if on(bit) {
			spec[key] = value
		}
	}
	set(1, "ephemeralStorage", p.ephemeralStorage)
	set(2, "roles", strings.Split(p.roles, ","))
	set(3, "labels", map[string]any{p.labelKey: p.labelValue})
	set(4, "taints", []any{map[string]any{"key": p.taintKey, "value": p.taintValue, "effect": p.effect}})
	set(5, "kubernetesVersion", p.kubernetesVersion)
	set(6, "osImage", p.osImage)
	set(7, "kernelModules", []any{p.kernelModule})
	set(8, "gpus", []any{map[string]any{"deviceName": p.gpuDevice, "count": p.gpuCount}})
	set(9, "talos", map[string]any{"sysctls": map[string]any{p.sysctlKey: p.sysctlValue}})
	set(10, "rollout", map[string]any{"maxSurge": intOrString(p.maxSurge), "maxUnavailable": intOrString(p.maxUnhealthy)})
	set(11, "healthCheck", map[string]any{"nodeStartupTimeout": p.nodeStartupTimeout, "maxUnhealthy": intOrString(p.maxUnhealthy)})
	set(12, "autoscaling", map[string]any{"scaleDownUtilizationThreshold": p.threshold, "scaleDownUnneededTime": p.nodeStartupTimeout})
	if on(13) {
		spec["nodeGroupClassName"] = fuzzClass
	} else if on(14) {
		spec["nodeGroupClassName"] = "kairos"
	}
	if on(15) {
		spec["locationName"] = fuzzLocation
	}

	classSpec := map[string]any{"os": "Talos", "talos": map[string]any{
		"extensions": []any{p.classString}, "kernelArgs": []any{p.classString}}}
	if on(16) {
		classSpec = map[string]any{"os": "Kairos", "image": map[string]any{"reference": p.classString, "kubernetesVersion": p.classVersion}}
	}
	kubevirt := map[string]any{}
	if on(17) {
		kubevirt["storageClassName"] = p.storageClass
	}
	locSpec := map[string]any{"provider": map[string]any{"type": "KubeVirt", "kubevirt": kubevirt}, "allowedNamespaces": map[string]any{}}
	if on(20) {
		// A Proxmox location whose free-text fields are the fuzzer's: the bridge, a
		// template tag, a node, the tenant API server's domain.
		locSpec["provider"] = map[string]any{"type": "Proxmox", "proxmox": map[string]any{
			"credentialsRef":  map[string]any{"namespace": "platform", "name": "pve"},
			"tenantAPIServer": map[string]any{"domain": p.region},
			"ipv4":            map[string]any{"addresses": []any{"10.20.0.10-10.20.0.99"}, "prefix": 16, "gateway": "10.20.0.1"},
			"dnsServers":      []any{"10.20.0.2"},
			"allowedNodes":    []any{p.region},
			"network":         map[string]any{"bridge": p.storageClass},
			"template":        map[string]any{"tags": []any{p.zone}},
		}}
	}
	if on(18) {
		locSpec["zone"] = p.zone
	}
	if on(19) {
		locSpec["region"] = p.region
	}
	// As JSON, which is YAML: a YAML encoder refuses control characters, which a
	// tenant's client may well send in JSON.
	doc := func(kind, ns, name string, spec map[string]any) []byte {
		meta := map[string]any{"name": name}
		if ns != "" {
			meta["namespace"] = ns
		}
		b, err := json.Marshal(map[string]any{"apiVersion": "nodegroup.io/v1alpha1", "kind": kind, "metadata": meta, "spec": spec})
		if err != nil {
			panic(err)
		}
		return b
	}
	return doc("NodeGroup", fuzzNamespace, "pool", spec), doc("NodeGroupClass", "", fuzzClass, classSpec), doc("Location", "", fuzzLocation, locSpec)
}

// admitted is the object of kind of a file as the chart's CRD admits it on a create, or
// nil.
func admitted(t *testing.T, kind string, data []byte) *unstructured.Unstructured {
	kinds, err := customresource.Chart()
	if err != nil {
		t.Fatal(err)
	}
	u, err := offline.File{Path: "platform.yaml", Data: data}.Object(kind, "")
	if err != nil {
		return nil
	}
	k := kinds[u.GroupVersionKind().GroupKind()]
	if k == nil {
		t.Fatalf("the chart has no CRD of %s", u.GroupVersionKind())
	}
	if k.Create(context.Background(), u) != nil {
		return nil
	}
	return u
}

// renderPool is `kubectl nodegroup render` of p, with the checks of the fuzz test. It
// returns how far the pool got: "rendered", or why it stopped before.
func renderPool(t *testing.T, p fuzzPool) string {
	ctx := context.Background()
	poolDoc, classDoc, locDoc := p.build()
	ng, _, err := offline.Pool(ctx, offline.File{Path: "pool.yaml", Data: poolDoc}, "", nil, nil)
	if err != nil {
		return "refused by the CRD: " + err.Error()
	}
	files, err := fuzzCluster()
	if err != nil {
		t.Fatal(err)
	}
	store, resolver, err := offline.Cluster(ng, files)
	if err != nil {
		t.Fatal(err)
	}
	if u := admitted(t, "NodeGroupClass", classDoc); u != nil {
		store.Add(u)
	}
	if u := admitted(t, "Location", locDoc); u != nil {
		store.Add(u)
	}
	in, err := resolver.Resolve(ctx, ng)
	if err != nil {
		if rerr := (*resolve.Error)(nil); !errors.As(err, &rerr) {
			t.Fatalf("resolve failed without a condition to report: %v\n%s", err, poolDoc)
		}
		return "not resolved: " + err.Error()
	}
	pin, err := policy.Gather(ctx, store, ng, &in.Class, &in.Location, in.ControlPlaneVersion)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := policy.Evaluate(ctx, pin); err != nil {
		t.Fatal(err)
	} else if len(v) > 0 {
		return fmt.Sprintf("refused by the webhook: %v", v)
	}
	out, err := render.Render(in)
	if err != nil {
		return "not rendered: " + err.Error()
	}
	again, err := render.Render(in)
	if err != nil {
		t.Fatalf("a second render of the same pool fails: %v", err)
	}
	kinds, err := upstreamKinds()
	if err != nil {
		t.Fatal(err)
	}
	s := scheme.New()
	for i, obj := range out.Objects() {
		first, _ := json.Marshal(obj)
		second, _ := json.Marshal(again.Objects()[i])
		if !bytes.Equal(first, second) {
			t.Fatalf("the same pool renders differently:\n%s\n%s", first, second)
		}
		u, err := toUnstructured(s, obj)
		if err != nil {
			t.Fatal(err)
		}
		k := kinds[u.GroupVersionKind()]
		if k == nil {
			t.Fatalf("render wrote %s, which no upstream CRD serves", u.GroupVersionKind())
		}
		if err := k.Create(ctx, u); err != nil {
			t.Fatalf("the upstream CRD refuses the %s of pool\n%s\n%v\n%s", u.GetKind(), poolDoc, err, first)
		}
	}
	if tct, ok := out.Bootstrap.(*talos.TalosConfigTemplate); ok {
		data := tct.Spec.Template.Spec.Data
		if _, err := configloader.NewFromBytes([]byte(data)); err != nil {
			t.Fatalf("Talos' loader refuses the machine config of pool\n%s\n%v\n%s", poolDoc, err, data)
		}
	}
	if in.Location.Provider.Satellite() {
		return renderSatellite(t, in, poolDoc)
	}
	return "rendered"
}

// renderSatellite renders the InfraCluster of the satellite a pool on a Proxmox location
// runs under, with the checks of renderPool: the same object twice, admitted by capmox's
// CRD.
func renderSatellite(t *testing.T, in *render.Input, poolDoc []byte) string {
	sat := &render.SatelliteInput{Namespace: in.Namespace, Cluster: in.Cluster, LocationName: in.LocationName, Location: in.Location}
	cluster, err := render.ProxmoxCluster(sat)
	if err != nil {
		t.Fatalf("the pool rendered but its satellite's ProxmoxCluster does not: %v\n%s", err, poolDoc)
	}
	again, err := render.ProxmoxCluster(sat)
	if err != nil {
		t.Fatalf("a second render of the same satellite fails: %v", err)
	}
	first, _ := json.Marshal(cluster)
	second, _ := json.Marshal(again)
	if !bytes.Equal(first, second) {
		t.Fatalf("the same satellite renders differently:\n%s\n%s", first, second)
	}
	kinds, err := upstreamKinds()
	if err != nil {
		t.Fatal(err)
	}
	u, err := toUnstructured(scheme.New(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	k := kinds[u.GroupVersionKind()]
	if k == nil {
		t.Fatalf("render wrote %s, which no upstream CRD serves", u.GroupVersionKind())
	}
	if err := k.Create(context.Background(), u); err != nil {
		t.Fatalf("capmox's CRD refuses the ProxmoxCluster of pool\n%s\n%v\n%s", poolDoc, err, first)
	}
	return "rendered"
}

// fuzzSeeds are pools that render: Talos and Kairos, from the built-in and the fuzzed
// class and location (KubeVirt and Proxmox), sized by resources and by instancetype, with
// every optional part.
func fuzzSeeds() []fuzzPool {
	base := fuzzPool{minReplicas: 1, maxReplicas: 3, cpu: "2", memory: "4Gi", instanceType: "u1.medium",
		ephemeralStorage: "20Gi", roles: "worker,system", labelKey: "workload", labelValue: "batch",
		taintKey: "workload", taintValue: "batch", effect: "NoSchedule", kubernetesVersion: "v1.35",
		osImage: "registry.example.com/talos/installer:v1.11.0", kernelModule: "nvidia", gpuDevice: "nvidia.com/GA102GL_A10",
		gpuCount: 1, sysctlKey: "net.core.somaxconn", sysctlValue: "65535", maxSurge: "1", maxUnhealthy: "40%",
		nodeStartupTimeout: "10m", threshold: "0.5", classString: "siderolabs/qemu-guest-agent", classVersion: "v1.35.4",
		zone: "zone-a", region: "eu-1", storageClass: "replicated"}
	kairos := base
	kairos.classString = "registry.example.com/platform/kairos-worker@sha256:4f8c3a0e2b1d9c7a6e5f4d3c2b1a09f8e7d6c5b4a3928170f6e5d4c3b2a19081"
	var seeds []fuzzPool
	for _, s := range []struct {
		p     fuzzPool
		flags uint32
	}{
		{base, 0},
		{base, 1<<2 | 1<<3 | 1<<4},
		{base, 1 | 1<<5 | 1<<10 | 1<<11 | 1<<12},
		{base, 1<<7 | 1<<8 | 1<<9 | 1<<13 | 1<<15 | 1<<17 | 1<<18 | 1<<19},
		{base, 1<<1 | 1<<6},
		{kairos, 1<<3 | 1<<4 | 1<<13 | 1<<16},
		{kairos, 1 | 1<<13 | 1<<15 | 1<<16 | 1<<17 | 1<<18 | 1<<19},
		{base, 1<<3 | 1<<15 | 1<<18 | 1<<19 | 1<<20},
	} {
		s.p.flags = s.flags
		seeds = append(seeds, s.p)
	}
	return seeds
}

func FuzzRender(f *testing.F) {
	for _, p := range fuzzSeeds() {
		f.Add(p.flags, p.minReplicas, p.maxReplicas, p.cpu, p.memory, p.instanceType, p.ephemeralStorage, p.roles,
			p.labelKey, p.labelValue, p.taintKey, p.taintValue, p.effect, p.kubernetesVersion, p.osImage, p.kernelModule,
			p.gpuDevice, p.gpuCount, p.sysctlKey, p.sysctlValue, p.maxSurge, p.maxUnhealthy, p.nodeStartupTimeout,
			p.threshold, p.classString, p.classVersion, p.zone, p.region, p.storageClass)
	}
	f.Fuzz(func(t *testing.T, flags uint32, minReplicas, maxReplicas int32, cpu, memory, instanceType, ephemeralStorage, roles,
		labelKey, labelValue, taintKey, taintValue, effect, kubernetesVersion, osImage, kernelModule,
		gpuDevice string, gpuCount int32, sysctlKey, sysctlValue, maxSurge, maxUnhealthy, nodeStartupTimeout,
		threshold, classString, classVersion, zone, region, storageClass string) {
		defer watchdog("rendering a pool")()
		_ = renderPool(t, fuzzPool{flags, minReplicas, maxReplicas, cpu, memory, instanceType, ephemeralStorage, roles,
			labelKey, labelValue, taintKey, taintValue, effect, kubernetesVersion, osImage, kernelModule,
			gpuDevice, gpuCount, sysctlKey, sysctlValue, maxSurge, maxUnhealthy, nodeStartupTimeout,
			threshold, classString, classVersion, zone, region, storageClass})
	})
}

// TestFuzzRenderSeedsRender keeps the fuzz test honest: each of its seeds gets through
// every check (Talos and Kairos), rather than being refused before render.
func TestFuzzRenderSeedsRender(t *testing.T) {
	for i, p := range fuzzSeeds() {
		if got := renderPool(t, p); got != "rendered" {
			pool, _, _ := p.build()
			t.Errorf("seed %d: %s\n%s", i, got, pool)
		}
	}
}
