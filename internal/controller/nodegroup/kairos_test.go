package nodegroup_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
	"github.com/nodegroup-io/nodegroup-operator/internal/controller/nodegroup"
	"github.com/nodegroup-io/nodegroup-operator/internal/credentials"
	"github.com/nodegroup-io/nodegroup-operator/internal/names"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capk"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kairos"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
	"github.com/nodegroup-io/nodegroup-operator/internal/resolve"
	"github.com/nodegroup-io/nodegroup-operator/internal/testenv"
)

const kairosImage = "registry.example.com/platform/kairos-worker@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// kairosClass publishes a Kairos class with its own image and a pull secret, once.
func kairosClass(t *testing.T) { kairosClassNamed(t, "kairos-own") }

// kairosClassNamed publishes the Kairos class of kairosClass under another name, once.
func kairosClassNamed(t *testing.T, name string) {
	t.Helper()
	mustCreateOnce(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "platform"}})
	auth, _ := json.Marshal(map[string]any{"auths": map[string]any{"registry.example.com": map[string]string{"username": "robot", "password": "s3cret"}}})
	mustCreateOnce(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "registry"},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: auth}})
	mustCreateOnce(t, &v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeGroupClassSpec{
		OS:                 v1.OSKairos,
		Image:              &v1.ClassImage{Reference: kairosImage, KubernetesVersion: "v1.35.2"},
		ImagePullSecretRef: &v1.SecretReference{Namespace: "platform", Name: "registry"},
	}})
}

// appliedKairosPool creates a pool of the class of kairosClass in a new tenant and
// waits until its objects are applied; it returns the pool as it then is.
func appliedKairosPool(t *testing.T, name string) *v1.NodeGroup {
	t.Helper()
	kairosClass(t)
	ng := pool(tenant(t), name, func(s *v1.NodeGroupSpec) { s.NodeGroupClassName = "kairos-own" })
	env.MustCreate(t, ng)
	return waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, nodegroup.ReasonApplied)
}

func TestKairosPool(t *testing.T) {
	ctx := context.Background()
	got := appliedKairosPool(t, "kairos")
	ng, ns := got.DeepCopy(), got.Namespace
	if got.Status.OS != v1.OSKairos || got.Status.KubernetesVersion != "v1.35.2" {
		t.Fatalf("status os=%s version=%s, want Kairos v1.35.2 (the class image's release)", got.Status.OS, got.Status.KubernetesVersion)
	}
	kct := &kairos.KairosConfigTemplate{}
	mustGet(t, ns, got.Status.BootstrapTemplateName, kct)
	spec := kct.Spec.Template.Spec
	if spec.Distribution != "kubeadm" || spec.Role != "worker" || spec.KubernetesVersion != "v1.35.2" {
		t.Errorf("template: distribution=%s role=%s version=%s", spec.Distribution, spec.Role, spec.KubernetesVersion)
	}
	if spec.UserPasswordSecretRef == nil || spec.UserPasswordSecretRef.Name != credentials.WorkerPasswordName("tenant") {
		t.Fatalf("userPasswordSecretRef = %+v", spec.UserPasswordSecretRef)
	}
	pw := &corev1.Secret{}
	mustGet(t, ns, credentials.WorkerPasswordName("tenant"), pw)
	if len(pw.Data[credentials.WorkerPasswordKey]) < 32 || len(pw.OwnerReferences) != 1 || pw.OwnerReferences[0].Kind != "Cluster" {
		t.Errorf("worker password Secret: %d bytes, owners %v", len(pw.Data[credentials.WorkerPasswordKey]), pw.OwnerReferences)
	}
	pull := &corev1.Secret{}
	mustGet(t, ns, credentials.PullSecretName("kairos-own"), pull)
	if string(pull.Data["accessKeyId"]) != "robot" || string(pull.Data["secretKey"]) != "s3cret" {
		t.Errorf("pull secret copy holds %v", pull.Data)
	}
	infra := &capk.KubevirtMachineTemplate{}
	mustGet(t, ns, got.Status.InfrastructureTemplateName, infra)
	vm := infra.Spec.Template.Spec.VirtualMachineTemplate.Spec
	src := vm.DataVolumeTemplates[0].Spec.Source.Registry
	if src == nil || src.URL == nil || *src.URL != "docker://"+kairosImage || src.SecretRef == nil || *src.SecretRef != pull.Name {
		t.Errorf("system disk source = %+v", src)
	}
	if efi := vm.Template.Spec.Domain.Firmware; efi == nil || efi.Bootloader.EFI.SecureBoot == nil || *efi.Bootloader.EFI.SecureBoot {
		t.Errorf("firmware = %+v, want EFI with secure boot off", efi)
	}

	// A new credential in the platform's Secret reaches the copy.
	platformSecret := &corev1.Secret{}
	mustGet(t, "platform", "registry", platformSecret)
	rotated, _ := json.Marshal(map[string]any{"auths": map[string]any{"registry.example.com": map[string]string{"username": "robot", "password": "rotated"}}})
	platformSecret.Data[corev1.DockerConfigJsonKey] = rotated
	if err := env.Client.Update(ctx, platformSecret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mustGet(t, "platform", "registry", platformSecret)
		auth, _ := json.Marshal(map[string]any{"auths": map[string]any{"registry.example.com": map[string]string{"username": "robot", "password": "s3cret"}}})
		platformSecret.Data[corev1.DockerConfigJsonKey] = auth
		_ = env.Client.Update(context.Background(), platformSecret)
	})
	testenv.Eventually(t, "the pull secret copy follows its source", func() bool {
		mustGet(t, ns, credentials.PullSecretName("kairos-own"), pull)
		return string(pull.Data["secretKey"]) == "rotated"
	})

	// Deleting the pool removes the pull secret copy it was the last user of.
	if err := env.Client.Delete(ctx, ng); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "pull secret copy removed with its last pool", func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(pull), &corev1.Secret{}))
	})
	mustGet(t, ns, credentials.WorkerPasswordName("tenant"), &corev1.Secret{}) // per cluster: stays
}

// runningObjects is what a running pool has: compared before and after a refused switch.
type runningObjects struct {
	MD        clusterv1.MachineDeploymentSpec
	Bootstrap string
	Infra     string
}

func snapshot(t *testing.T, ng *v1.NodeGroup) runningObjects {
	t.Helper()
	md := &clusterv1.MachineDeployment{}
	mustGet(t, ng.Namespace, "tenant-"+ng.Name, md)
	return runningObjects{MD: md.Spec, Bootstrap: md.Spec.Template.Spec.Bootstrap.ConfigRef.Name, Infra: md.Spec.Template.Spec.InfrastructureRef.Name}
}

func TestOSSwitchRefusedBothWays(t *testing.T) {
	kairosClass(t)
	for _, tc := range []struct{ name, from, to string }{
		{"talos to kairos", "talos", "kairos-own"},
		{"kairos to talos", "kairos-own", "talos"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := tenant(t)
			ng := pool(ns, "switch", func(s *v1.NodeGroupSpec) { s.NodeGroupClassName = tc.from })
			env.MustCreate(t, ng)
			waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, "Applied")
			before := snapshot(t, ng)

			mustUpdate(t, ng, func(n *v1.NodeGroup) { n.Spec.NodeGroupClassName = tc.to })
			got := waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionFalse, nodegroup.ReasonPolicyViolation)
			c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionRendered)
			if !strings.Contains(c.Message, "a running pool cannot switch between Talos and Kairos") {
				t.Errorf("message: %s", c.Message)
			}
			time.Sleep(500 * time.Millisecond)
			after := snapshot(t, ng)
			if !equality.Semantic.DeepEqual(before, after) {
				t.Errorf("a refused switch changed the running objects:\nbefore %+v\nafter  %+v", before, after)
			}
			// Both templates the machines boot from are still there.
			if tc.from == "talos" {
				mustGet(t, ns, before.Bootstrap, &talos.TalosConfigTemplate{})
			} else {
				mustGet(t, ns, before.Bootstrap, &kairos.KairosConfigTemplate{})
			}
			mustGet(t, ns, before.Infra, &capk.KubevirtMachineTemplate{})

			// Moving back heals the pool.
			mustUpdate(t, ng, func(n *v1.NodeGroup) { n.Spec.NodeGroupClassName = tc.from })
			waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, "Applied")
		})
	}
}

func TestUnrenderedPoolMovesFreely(t *testing.T) {
	kairosClass(t)
	ns := tenant(t)
	ng := pool(ns, "free", func(s *v1.NodeGroupSpec) { s.NodeGroupClassName = "nope" })
	env.MustCreate(t, ng)
	waitCondition(t, ng, v1.ConditionClassResolved, metav1.ConditionFalse, "ClassNotFound")
	mustUpdate(t, ng, func(n *v1.NodeGroup) { n.Spec.NodeGroupClassName = "kairos-own" })
	waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, "Applied")
}

// TestAddressChangeRerenders: when the tenant API server's Service comes back with
// another ClusterIP, the pool's bootstrap template carries the new address.
func TestAddressChangeRerenders(t *testing.T) {
	ctx := context.Background()
	first := appliedKairosPool(t, "moving")
	ng, ns := first.DeepCopy(), first.Namespace
	svc := &corev1.Service{}
	mustGet(t, ns, "tenant", svc)
	oldIP := svc.Spec.ClusterIP
	if err := env.Client.Delete(ctx, svc); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ng, v1.ConditionClusterFound, metav1.ConditionFalse, "ControlPlanePending")
	// Ask for an address other than the old one (the test API server's range is
	// 10.0.0.0/24); other tests' Services hold some, so take the first free one.
	created := false
	for last := 254; last > 100 && !created; last-- {
		ip := fmt.Sprintf("10.0.0.%d", last)
		if ip == oldIP {
			continue
		}
		err := env.Client.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
			Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Name: "https", Port: 6443}}}})
		switch {
		case err == nil:
			created = true
		case !strings.Contains(err.Error(), "already allocated"):
			t.Fatal(err)
		}
	}
	if !created {
		t.Fatal("no free ClusterIP between 10.0.0.101 and 10.0.0.254")
	}
	mustGet(t, ns, "tenant", svc)
	var second *v1.NodeGroup
	testenv.Eventually(t, "a new bootstrap template with the new address", func() bool {
		second = waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, "Applied")
		return second.Status.BootstrapTemplateName != first.Status.BootstrapTemplateName
	})
	kct := &kairos.KairosConfigTemplate{}
	mustGet(t, ns, second.Status.BootstrapTemplateName, kct)
	var hosts string
	for _, f := range kct.Spec.Template.Spec.Files {
		if f.Path == "/etc/hosts" {
			hosts = f.Content
		}
	}
	if !strings.Contains(hosts, svc.Spec.ClusterIP+" tenant ") || strings.Contains(hosts, oldIP+" ") {
		t.Errorf("hosts file after the address change:\n%s\nwant %s, not %s", hosts, svc.Spec.ClusterIP, oldIP)
	}
	if second.Status.InfrastructureTemplateName != first.Status.InfrastructureTemplateName {
		t.Errorf("the machine template changed on an address change")
	}
}

// TestPoolBreakingAClassRuleIsHeld: a pool that breaks its class's poolRules (admitted
// before the webhook ran, say) gets a condition and is not rendered.
func TestPoolBreakingAClassRuleIsHeld(t *testing.T) {
	mustCreateOnce(t, &v1.NodeGroupClass{ObjectMeta: metav1.ObjectMeta{Name: "at-most-two"}, Spec: v1.NodeGroupClassSpec{OS: v1.OSTalos,
		PoolRules: []v1.PoolRule{{Rule: "object.spec.maxReplicas <= 2", Message: "pools on this class have at most 2 machines: lower spec.maxReplicas"}}}})
	ns := tenant(t)
	ng := pool(ns, "big", func(s *v1.NodeGroupSpec) { s.NodeGroupClassName, s.MaxReplicas = "at-most-two", 5 })
	env.MustCreate(t, ng)
	got := waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionFalse, nodegroup.ReasonPolicyViolation)
	if c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionRendered); !strings.Contains(c.Message, "at most 2 machines") {
		t.Errorf("message: %s", c.Message)
	}
	md := &clusterv1.MachineDeployment{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "tenant-big"}, md); !apierrors.IsNotFound(err) {
		t.Errorf("a pool breaking its class's rule was rendered (%v)", err)
	}
	mustUpdate(t, ng, func(n *v1.NodeGroup) { n.Spec.MaxReplicas = 2 })
	waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, "Applied")
}

// TestFailedClassChangeKeepsPullSecretCopy: a pool moved to a class that does not
// resolve keeps the pull secret copy its applied templates name; once the class is
// published and its templates applied, the old copy is released, although no spec
// changed since the status last described the pool.
func TestFailedClassChangeKeepsPullSecretCopy(t *testing.T) {
	ctx := context.Background()
	ng := appliedKairosPool(t, "moving-class")
	ns := ng.Namespace
	oldCopy := client.ObjectKey{Namespace: ns, Name: credentials.PullSecretName("kairos-own")}
	newCopy := client.ObjectKey{Namespace: ns, Name: credentials.PullSecretName("kairos-later")}
	ownedByPool := func(key client.ObjectKey) bool {
		t.Helper()
		s := &corev1.Secret{}
		if err := env.Client.Get(ctx, key, s); err != nil {
			if apierrors.IsNotFound(err) {
				return false
			}
			t.Fatal(err)
		}
		cur := &v1.NodeGroup{}
		mustGet(t, ns, ng.Name, cur)
		return slices.ContainsFunc(s.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == cur.UID })
	}
	if !ownedByPool(oldCopy) {
		t.Fatalf("no pull secret copy %s owned by the pool", oldCopy)
	}

	mustUpdate(t, ng, func(n *v1.NodeGroup) { n.Spec.NodeGroupClassName = "kairos-later" })
	waitCondition(t, ng, v1.ConditionClassResolved, metav1.ConditionFalse, resolve.ReasonClassNotFound)
	waitQuiet(t)
	if !ownedByPool(oldCopy) {
		t.Fatalf("a class change that failed released %s, which the applied templates name", oldCopy)
	}

	kairosClassNamed(t, "kairos-later")
	waitCondition(t, ng, v1.ConditionRendered, metav1.ConditionTrue, nodegroup.ReasonApplied)
	testenv.Eventually(t, "the old class's copy released once the new class is applied", func() bool {
		return !ownedByPool(oldCopy)
	})
	if !ownedByPool(newCopy) {
		t.Errorf("no pull secret copy %s owned by the pool", newCopy)
	}
	if err := env.Client.Get(ctx, oldCopy, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the old copy, which no pool uses any more, is still there (%v)", err)
	}
}

// TestRolloutKeepsOldPullSecretCopy: while a MachineSet of the pool still makes
// machines from the old class's templates (a rollout under way), the old class's pull
// secret copy stays, since a machine that MachineSet makes boots from them; when it
// goes, so does the copy.
func TestRolloutKeepsOldPullSecretCopy(t *testing.T) {
	ctx := context.Background()
	ng := appliedKairosPool(t, "rolling-class")
	ns := ng.Namespace
	oldCopy := client.ObjectKey{Namespace: ns, Name: credentials.PullSecretName("kairos-own")}
	ms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-rolling-class-old", Labels: map[string]string{
		names.LabelPool: "rolling-class", names.LabelClusterName: "tenant"}},
		Spec: clusterv1.MachineSetSpec{ClusterName: "tenant",
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"x": "y"}}, Spec: clusterv1.MachineSpec{
				ClusterName: "tenant", Version: ng.Status.KubernetesVersion,
				Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KairosConfigTemplate", Name: ng.Status.BootstrapTemplateName}},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "KubevirtMachineTemplate", Name: ng.Status.InfrastructureTemplateName},
			}}}}
	env.MustCreate(t, ms)

	kairosClassNamed(t, "kairos-next")
	mustUpdate(t, ng, func(n *v1.NodeGroup) { n.Spec.NodeGroupClassName = "kairos-next" })
	moved := waitGeneration(t, ng)
	if c := meta.FindStatusCondition(moved.Status.Conditions, v1.ConditionRendered); c == nil || c.Reason != nodegroup.ReasonApplied {
		t.Fatalf("the pool on the new class: Rendered %+v", c)
	}
	waitQuiet(t)
	if err := env.Client.Get(ctx, oldCopy, &corev1.Secret{}); err != nil {
		t.Fatalf("the old class's copy, which the old MachineSet's templates name, is gone mid-rollout: %v", err)
	}

	if err := env.Client.Delete(ctx, ms); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the old class's copy released once no MachineSet makes machines from its templates", func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, oldCopy, &corev1.Secret{}))
	})
}
