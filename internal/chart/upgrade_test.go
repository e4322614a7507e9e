package chart

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

// crdReleaseName is the release of the CRD chart, installed before the operator's.
const crdReleaseName = "nodegroup-operator-crds"

// addedField is the NodeGroup spec field the upgraded CRD chart serves and the one
// installed first does not.
const addedField = "upgradeProbe"

// helmConfiguration is the Helm SDK's action configuration for the control plane cp,
// as `helm --kubeconfig ... --namespace releaseNamespace` (releases stored in Secrets).
func helmConfiguration(t *testing.T, cp *testenv.Env) *action.Configuration {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, cp.KubeConfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := genericclioptions.NewConfigFlags(false)
	ns := releaseNamespace
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, releaseNamespace, "secret", t.Logf); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// withAddedField is the CRD chart as a later build would ship it: the NodeGroup CRD's
// spec gained the string field addedField, and the chart's version moved on.
func withAddedField(t *testing.T) *chart.Chart {
	t.Helper()
	c := loadDir(t, crdChartDir())
	c.Metadata.Version = "0.1.1"
	for _, f := range c.Templates {
		if f.Name != "templates/nodegroup.io_nodegroups.yaml" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(f.Data, crd); err != nil {
			t.Fatal(err)
		}
		for i := range crd.Spec.Versions {
			spec := crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
			spec.Properties[addedField] = apiextensionsv1.JSONSchemaProps{Type: "string", MaxLength: ptr.To(int64(63)), Description: "a field a later release added"}
			crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
		}
		data, err := yaml.Marshal(crd)
		if err != nil {
			t.Fatal(err)
		}
		f.Data = data
		return c
	}
	t.Fatal("the CRD chart has no templates/nodegroup.io_nodegroups.yaml")
	return nil
}

// TestHelmInstallAndUpgrade installs the CRD chart and the operator's chart as two
// releases with the Helm SDK (action.Install, as `helm install`) on a control plane of
// its own that has none of this project's CRDs, creates pools, then upgrades both: the
// CRD release to a build whose NodeGroup CRD gained a field, the operator's with another
// allowedNamespaces for the built-in location. The field is served, the pools are
// untouched, the location follows, and uninstalling keeps the CRDs and the pools.
func TestHelmInstallAndUpgrade(t *testing.T) {
	cp, err := testenv.Start(testenv.Options{WithoutProjectCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	cfg := helmConfiguration(t, cp)
	ctx := context.Background()
	c := cp.Client

	// One release that creates the CRDs and the built-ins cannot be built: Helm maps
	// every object to a resource before it creates any (README, "CRDs").
	t.Run("one release with the CRDs and the built-ins is refused", func(t *testing.T) {
		install := action.NewInstall(cfg)
		install.ReleaseName, install.Namespace, install.DryRun, install.DryRunOption = releaseName, releaseNamespace, true, "server"
		_, err := install.Run(loadChart(t), parseValues(t, "crds:\n  enabled: true\n"))
		if err == nil || !strings.Contains(err.Error(), `no matches for kind "Location"`) {
			t.Fatalf("got %v, want Helm's refusal to build a Location before its CRD exists", err)
		}
	})

	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace = crdReleaseName, releaseNamespace, true
	install.Wait, install.Timeout = true, time.Minute // CRDs: until established
	if _, err := install.Run(loadDir(t, crdChartDir()), nil); err != nil {
		t.Fatalf("helm install %s: %v", crdReleaseName, err)
	}
	for _, name := range []string{"nodegroups.nodegroup.io", "nodegroupclasses.nodegroup.io", "locations.nodegroup.io"} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatal(err)
		}
		if a := crd.Annotations; a["helm.sh/resource-policy"] != "keep" || a["meta.helm.sh/release-name"] != crdReleaseName {
			t.Errorf("CRD %s: annotations %v, want kept and owned by the release %s", name, a, crdReleaseName)
		}
	}

	// No replica runs, so no webhook may be registered: with failurePolicy Fail it
	// would refuse every pool written below.
	const operatorValues = "webhook:\n  enabled: false\nbuiltins:\n  location:\n    inCluster:\n      allowedNamespaces:\n        matchLabels:\n          tier: gold\n"
	install = action.NewInstall(cfg)
	install.ReleaseName, install.Namespace = releaseName, releaseNamespace
	if _, err := install.Run(loadChart(t), parseValues(t, operatorValues)); err != nil {
		t.Fatalf("helm install %s: %v", releaseName, err)
	}

	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-upgrade"}}); err != nil {
		t.Fatal(err)
	}
	var pools []*v1.NodeGroup
	for _, name := range []string{"web", "batch"} {
		ng := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-upgrade", Name: name}, Spec: v1.NodeGroupSpec{
			ClusterName: "tenant", MinReplicas: 1, MaxReplicas: 3, Roles: []string{"worker"},
			Resources: &v1.MachineResources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
		}}
		if err := c.Create(ctx, ng); err != nil {
			t.Fatal(err)
		}
		pools = append(pools, ng)
	}

	// withField is a pool written with the added field, as a server-side dry run with
	// strict field validation: refused while the field is unknown, and once served,
	// kept in what the server would store.
	withField := func() (*unstructured.Unstructured, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(v1.GroupVersion.WithKind("NodeGroup"))
		if err := c.Get(ctx, client.ObjectKeyFromObject(pools[0]), u); err != nil {
			return nil, err
		}
		_ = unstructured.SetNestedField(u.Object, "probe", "spec", addedField)
		err := c.Update(ctx, u, client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict))
		return u, err
	}
	if _, err := withField(); err == nil || !strings.Contains(err.Error(), `unknown field "spec.`+addedField+`"`) {
		t.Fatalf("before the upgrade: %v, want the field refused as unknown", err)
	}

	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace, upgrade.Wait, upgrade.Timeout = releaseNamespace, true, time.Minute
	rel, err := upgrade.Run(crdReleaseName, withAddedField(t), nil)
	if err != nil {
		t.Fatalf("helm upgrade %s: %v", crdReleaseName, err)
	}
	if rel.Version != 2 || rel.Chart.Metadata.Version != "0.1.1" {
		t.Errorf("release %s is at revision %d, chart %s", crdReleaseName, rel.Version, rel.Chart.Metadata.Version)
	}

	t.Run("the added field is served", func(t *testing.T) {
		var stored *unstructured.Unstructured
		testenv.Eventually(t, "the upgraded CRD served", func() bool {
			var err error
			stored, err = withField()
			return err == nil
		})
		if v, _, _ := unstructured.NestedString(stored.Object, "spec", addedField); v != "probe" {
			t.Errorf("spec.%s = %q after a dry-run write, want it kept", addedField, v)
		}
	})

	t.Run("the existing pools are untouched", func(t *testing.T) {
		for _, want := range pools {
			got := &v1.NodeGroup{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
				t.Fatal(err)
			}
			if got.UID != want.UID || got.ResourceVersion != want.ResourceVersion || !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
				t.Errorf("pool %s: uid %s→%s, resourceVersion %s→%s, spec changed %v", want.Name, want.UID, got.UID,
					want.ResourceVersion, got.ResourceVersion, !equality.Semantic.DeepEqual(got.Spec, want.Spec))
			}
		}
	})

	t.Run("the built-in location's allowedNamespaces follows helm upgrade", func(t *testing.T) {
		upgrade := action.NewUpgrade(cfg)
		upgrade.Namespace = releaseNamespace
		silver := strings.ReplaceAll(operatorValues, "tier: gold", "tier: silver")
		if _, err := upgrade.Run(releaseName, loadChart(t), parseValues(t, silver)); err != nil {
			t.Fatalf("helm upgrade %s: %v", releaseName, err)
		}
		loc := &v1.Location{}
		if err := c.Get(ctx, client.ObjectKey{Name: v1.BuiltinLocation}, loc); err != nil {
			t.Fatal(err)
		}
		if sel := loc.Spec.AllowedNamespaces; sel == nil || len(sel.MatchLabels) != 1 || sel.MatchLabels["tier"] != "silver" {
			t.Errorf("allowedNamespaces after the upgrade: %v, want tier=silver", sel)
		}
		// The provider is not the platform's to change under running pools.
		moved := silver + "      storageClassName: fast\n"
		if _, err := upgrade.Run(releaseName, loadChart(t), parseValues(t, moved)); err == nil || !strings.Contains(err.Error(), "spec.provider is immutable") {
			t.Errorf("an upgrade that changes the location's storage class: %v, want refused", err)
		}
	})

	t.Run("uninstall keeps the CRDs, the built-ins and the pools", func(t *testing.T) {
		for _, name := range []string{releaseName, crdReleaseName} {
			if _, err := action.NewUninstall(cfg).Run(name); err != nil {
				t.Fatalf("helm uninstall %s: %v", name, err)
			}
		}
		for _, obj := range []client.Object{
			&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "nodegroups.nodegroup.io"}},
			&v1.Location{ObjectMeta: metav1.ObjectMeta{Name: v1.BuiltinLocation}},
			&v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: v1.BuiltinTalosClass}},
			pools[0], pools[1],
		} {
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil || obj.GetDeletionTimestamp() != nil {
				t.Errorf("%T %s after uninstall: %v, deleting %v", obj, obj.GetName(), err, obj.GetDeletionTimestamp())
			}
		}
	})
}
