package autoscaler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodegroup-io/nodegroup-operator/internal/catalog"
)

// Settings are the platform's settings for every cluster's autoscaler: the chart's
// autoscaler values, handed to the operator as JSON (--autoscaler-settings). Field names
// are the values' names.
type Settings struct {
	// Enabled turns the managed autoscaler on for every cluster (a cluster may still
	// turn it off with AnnotationManaged).
	Enabled bool  `json:"enabled"`
	Image   Image `json:"image"`
	// Resources of the autoscaler's container.
	Resources corev1.ResourceRequirements `json:"resources"`
	// LogLevel is the autoscaler's klog verbosity (--v).
	LogLevel          int    `json:"logLevel"`
	PriorityClassName string `json:"priorityClassName"`

	// The cluster-wide options, as the autoscaler's flags of the same name.
	ScanInterval               metav1.Duration `json:"scanInterval"`
	Expander                   string          `json:"expander"`
	ScaleDownDelayAfterAdd     metav1.Duration `json:"scaleDownDelayAfterAdd"`
	ScaleDownDelayAfterDelete  metav1.Duration `json:"scaleDownDelayAfterDelete"`
	ScaleDownDelayAfterFailure metav1.Duration `json:"scaleDownDelayAfterFailure"`
	ScaleDownUnneededTime      metav1.Duration `json:"scaleDownUnneededTime"`
	MaxNodeProvisionTime       metav1.Duration `json:"maxNodeProvisionTime"`
	EnforceNodeGroupMinSize    bool            `json:"enforceNodeGroupMinSize"`
	// UnremovableNodeRecheckTimeout is how long a node found unremovable (a pod on it
	// cannot move) is left alone before it is looked at again.
	UnremovableNodeRecheckTimeout metav1.Duration `json:"unremovableNodeRecheckTimeout"`

	// StatusInterval is how often the operator reads a running autoscaler's status
	// ConfigMap in the tenant cluster for the pools' AbleToScaleUp (not an autoscaler
	// flag).
	StatusInterval metav1.Duration `json:"statusInterval"`
}

// Image says which autoscaler image runs for a cluster.
type Image struct {
	Repository string `json:"repository"`
	// Tags maps a Kubernetes minor (v1.35) to the tag run for clusters of that minor,
	// overriding the catalog's.
	Tags map[string]string `json:"tags"`
	// Digests maps a Kubernetes minor to the digest (sha256:...) its image is pinned by.
	Digests     map[string]string `json:"digests"`
	PullPolicy  string            `json:"pullPolicy"`
	PullSecrets []string          `json:"pullSecrets"`
}

// DefaultSettings are upstream's: the cluster-autoscaler chart's image repository and
// the autoscaler's own flag defaults (least-waste expander, 10 s scans, 10 min
// scale-down delays and unneeded time, 3 min after a failure, 15 min to provision,
// 5 min before an unremovable node is looked at again).
func DefaultSettings() Settings {
	return Settings{
		Enabled:                       true,
		Image:                         Image{Repository: "registry.k8s.io/autoscaling/cluster-autoscaler", PullPolicy: string(corev1.PullIfNotPresent)},
		LogLevel:                      4,
		ScanInterval:                  metav1.Duration{Duration: 10 * time.Second},
		Expander:                      "least-waste",
		ScaleDownDelayAfterAdd:        metav1.Duration{Duration: 10 * time.Minute},
		ScaleDownDelayAfterFailure:    metav1.Duration{Duration: 3 * time.Minute},
		ScaleDownUnneededTime:         metav1.Duration{Duration: 10 * time.Minute},
		MaxNodeProvisionTime:          metav1.Duration{Duration: 15 * time.Minute},
		UnremovableNodeRecheckTimeout: metav1.Duration{Duration: 5 * time.Minute},
		StatusInterval:                metav1.Duration{Duration: time.Minute},
	}
}

var (
	// expanders are the autoscaler's expanders that need no configuration of their own
	// (priority needs a ConfigMap, grpc a server: neither is made for a tenant).
	expanders = []string{"least-waste", "least-nodes", "most-pods", "random", "price"}
	digestRE  = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
	tagRE     = regexp.MustCompile(`^[A-Za-z0-9_][-A-Za-z0-9_.]{0,127}$`)
	repoRE    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.:]*[a-z0-9])?(/[a-z0-9]([-a-z0-9._]*[a-z0-9])?)+$`)
)

// ParseSettings reads the JSON of --autoscaler-settings over DefaultSettings, strictly:
// an unknown field or a bad value is an error at start, not a broken autoscaler later.
func ParseSettings(data string) (Settings, error) {
	s := DefaultSettings()
	if data == "" {
		return s, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Settings{}, fmt.Errorf("autoscaler settings: %w", err)
	}
	return s, s.validate()
}

func (s Settings) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("autoscaler settings: "+format, args...))
	}
	if !repoRE.MatchString(s.Image.Repository) {
		bad("image.repository %q is not an image repository", s.Image.Repository)
	}
	for minor, tag := range s.Image.Tags {
		if !isMinor(minor) || !tagRE.MatchString(tag) {
			bad("image.tags: %q: %q must map a minor such as v1.35 to an image tag", minor, tag)
		}
	}
	for minor, d := range s.Image.Digests {
		if !isMinor(minor) || !digestRE.MatchString(d) {
			bad("image.digests: %q: %q must map a minor such as v1.35 to a digest sha256:<64 hex>", minor, d)
		}
	}
	switch corev1.PullPolicy(s.Image.PullPolicy) {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		bad("image.pullPolicy %q must be Always, IfNotPresent or Never", s.Image.PullPolicy)
	}
	for _, p := range s.Image.PullSecrets {
		if msgs := validation.IsDNS1123Subdomain(p); len(msgs) > 0 {
			bad("image.pullSecrets: %q is not a Secret name", p)
		}
	}
	if !slices.Contains(expanders, s.Expander) {
		bad("expander %q must be one of %v", s.Expander, expanders)
	}
	if s.LogLevel < 0 || s.LogLevel > 10 {
		bad("logLevel %d must be between 0 and 10", s.LogLevel)
	}
	if s.ScanInterval.Duration < time.Second {
		bad("scanInterval %s must be at least 1s", s.ScanInterval.Duration)
	}
	if s.StatusInterval.Duration < time.Second {
		bad("statusInterval %s must be at least 1s", s.StatusInterval.Duration)
	}
	for name, d := range map[string]time.Duration{
		"scaleDownDelayAfterAdd": s.ScaleDownDelayAfterAdd.Duration, "scaleDownDelayAfterDelete": s.ScaleDownDelayAfterDelete.Duration,
		"scaleDownDelayAfterFailure": s.ScaleDownDelayAfterFailure.Duration, "scaleDownUnneededTime": s.ScaleDownUnneededTime.Duration,
		"maxNodeProvisionTime": s.MaxNodeProvisionTime.Duration, "unremovableNodeRecheckTimeout": s.UnremovableNodeRecheckTimeout.Duration,
	} {
		if d < 0 {
			bad("%s %s must not be negative", name, d)
		}
	}
	if s.PriorityClassName != "" {
		if msgs := validation.IsDNS1123Subdomain(s.PriorityClassName); len(msgs) > 0 {
			bad("priorityClassName %q is not a PriorityClass name", s.PriorityClassName)
		}
	}
	return errors.Join(errs...)
}

// ImageFor is the image run for a cluster whose control plane runs the Kubernetes
// version: the autoscaler minor the catalog pairs with its minor (or the tag the
// settings give for it), pinned by the settings' digest for that minor if any. ok is
// false when neither knows the minor.
func (s Settings) ImageFor(c *catalog.Catalog, version string) (ref string, ok bool) {
	minor, err := catalog.MinorOf(version)
	if err != nil {
		return "", false
	}
	tag := s.Image.Tags[minor]
	if tag == "" {
		r, found := c.Lookup(minor)
		if !found {
			return "", false
		}
		tag = r.ClusterAutoscaler
	}
	return ImageReference(s.Image.Repository, tag, s.Image.Digests[minor]), true
}

// isMinor says whether s is a Kubernetes minor, v1.35, and not a patch of one.
func isMinor(s string) bool {
	m, err := catalog.MinorOf(s)
	return err == nil && m == s
}
