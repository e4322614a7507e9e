package policy

import (
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/ext"
)

// Names of the CEL variables. The first five are objects, as a Kubernetes
// ValidatingAdmissionPolicy would see them (null when absent); the rest are facts the
// operator reads. The namespace's labels are not `namespace`: that is a reserved word of
// CEL.
const (
	VarObject                  = "object"
	VarOldObject               = "oldObject"
	VarClass                   = "class"
	VarOldClass                = "oldClass"
	VarLocation                = "location"
	VarNamespaceLabels         = "namespaceLabels"
	VarMachineDeploymentExists = "machineDeploymentExists"
	VarControlPlaneVersion     = "controlPlaneVersion"
	VarMachineCluster          = "machineCluster"
	VarCluster                 = "cluster"
)

// Limits of a class's poolRules. MaxPoolRules and MaxRuleLength repeat the CRD's caps so a
// Go caller cannot get past them; the cost limits are this package's.
const (
	// MaxPoolRules is the most rules a class may carry (the CRD's maxItems).
	MaxPoolRules = 16
	// MaxRuleLength is the longest rule text, in bytes (the CRD's maxLength).
	MaxRuleLength = 1024
	// RuleCostLimit bounds one rule, both as the checker's worst-case estimate when a class
	// is created and as the runtime cost at which an evaluation is stopped. Kubernetes
	// allows 1,000,000 per CRD or admission-policy expression and sizes that at a tenth of
	// a second; cel-go v0.31 walking the dyn maps of a pool took 0.4 to 5 microseconds per
	// unit here (see EvaluationTimeout), so this is a tenth of Kubernetes' figure. It still
	// admits two nested loops over any list of the pool (the CRD caps them at 32 items:
	// about 10,000) and a loop over its labels or annotations.
	RuleCostLimit = 100_000
	// EvaluationCostBudget bounds the runtime cost of all rules of one Evaluate (built-in
	// rules and up to MaxPoolRules class rules): once spent, the remaining rules are not
	// run and the pool is refused.
	EvaluationCostBudget = 2 * RuleCostLimit
	// EvaluationTimeout bounds the time of one Evaluate, whatever the caller's deadline.
	// Cost alone does not bound time in cel-go v0.31: its runtime cost tracker keeps a
	// stack that grows by an entry per comprehension iteration and is searched linearly,
	// so the time per unit of cost grows with the length of the list or map a loop walks.
	// On the CRD's lists (at most 32) that is negligible; on a pool with 20,000
	// annotations a single loop reaches RuleCostLimit only after about half a second.
	EvaluationTimeout = 500 * time.Millisecond
	// interruptCheckFrequency is how many comprehension iterations run between checks of
	// the context, so a cancelled request stops a long loop.
	interruptCheckFrequency = 100
)

// library is what every expression of this package may call: the CEL standard library,
// optional values (`object.spec.?resources`), cel.bind, and the string extension functions
// (split, replace, lowerAscii, ...), with limits on nesting and length, and literal
// regexes, durations and timestamps checked when a rule compiles. Regular
// expressions are bounded by Go's regexp itself (RE2: linear time, counted repetition at
// most 1000, "expression too large" past its program size cap); cel.RegexProgramSizeLimit
// is not used, as in cel-go v0.31 it panics on any counted repetition such as [0-9]{1,9}
// (fixed upstream by cel-go#1438). Nothing of Kubernetes' own CEL library (quantity(),
// isSorted(), ...) is here: this package does not depend on k8s.io/apiserver.
func library() []cel.EnvOption {
	return []cel.EnvOption{
		cel.OptionalTypes(),
		ext.Bindings(),
		ext.Strings(),
		cel.ParserRecursionLimit(64),
		cel.ParserExpressionSizeLimit(4 * MaxRuleLength),
		cel.ASTValidators(cel.ValidateRegexLiterals(), cel.ValidateDurationLiterals(), cel.ValidateTimestampLiterals()),
	}
}

// builtinEnv declares every variable the built-in rules read.
func builtinEnv() (*cel.Env, error) {
	return cel.NewEnv(append(library(),
		cel.Variable(VarObject, cel.DynType),
		cel.Variable(VarOldObject, cel.DynType),
		cel.Variable(VarClass, cel.DynType),
		cel.Variable(VarOldClass, cel.DynType),
		cel.Variable(VarLocation, cel.DynType),
		cel.Variable(VarNamespaceLabels, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(VarMachineDeploymentExists, cel.BoolType),
		cel.Variable(VarControlPlaneVersion, cel.StringType),
		cel.Variable(VarMachineCluster, cel.StringType),
		cel.Variable(VarCluster, cel.StringType),
	)...)
}

// poolRuleEnv is the same library with only the pool: a class's rule speaks about the
// pool (`object`, and `oldObject` on update), never about the platform's other objects.
func poolRuleEnv() (*cel.Env, error) {
	return cel.NewEnv(append(library(),
		cel.Variable(VarObject, cel.DynType),
		cel.Variable(VarOldObject, cel.DynType),
	)...)
}

// programOptions bound every program: a runtime cost limit and an interrupt check so a
// cancelled context stops a comprehension. OptOptimize compiles constant regexes and
// literal lists once, with the program, not at every evaluation.
var programOptions = []cel.ProgramOption{
	cel.EvalOptions(cel.OptOptimize),
	cel.CostLimit(RuleCostLimit),
	cel.InterruptCheckFrequency(interruptCheckFrequency),
}

// sizeHints is the largest size (characters of a string, items of a list, entries of a
// map) of the pool's fields that the CRD caps, keyed by the path below `object`, where `@`
// stands for an element of a list or map (for a map, the larger of key and value: a dyn
// map iterated with one variable yields its keys). The cost estimate of a rule reads them:
// a loop over spec.labels costs at most 32 iterations, not 2^64. Keep them in step with
// the kubebuilder markers of api/v1alpha1.
var sizeHints = map[string]uint64{
	"metadata.name":           253,
	"metadata.namespace":      63,
	"spec.clusterName":        63,
	"spec.nodeGroupClassName": 253,
	"spec.locationName":       253,
	"spec.instanceType":       253,
	"spec.kubernetesVersion":  32,
	"spec.osImage":            512,
	"spec.roles":              16,
	"spec.roles.@":            63,
	"spec.labels":             32,
	"spec.labels.@":           317,
	"spec.taints":             16,
	"spec.taints.@.key":       317,
	"spec.taints.@.value":     63,
	"spec.kernelModules":      32,
	"spec.kernelModules.@":    64,
	"spec.gpus":               8,
	"spec.gpus.@.deviceName":  253,
	"spec.talos.sysctls":      32,
	"spec.talos.sysctls.@":    256,
	"status.conditions":       16,
}

// defaultSizeHint is the size assumed for anything else (metadata labels and annotations,
// quantities, condition messages, ...). It is not a hard bound of the API: a pool with
// more is still bounded, by RuleCostLimit at runtime.
const defaultSizeHint = 256

// sizeEstimator gives the checker the size hints of the pool.
type sizeEstimator struct{}

func (sizeEstimator) EstimateSize(node checker.AstNode) *checker.SizeEstimate {
	path := node.Path()
	if len(path) == 0 || (path[0] != VarObject && path[0] != VarOldObject) {
		return nil
	}
	key := make([]string, 0, len(path)-1)
	for _, p := range path[1:] {
		if strings.HasPrefix(p, "@") {
			p = "@"
		}
		key = append(key, p)
	}
	size, ok := sizeHints[strings.Join(key, ".")]
	if !ok {
		size = defaultSizeHint
	}
	return &checker.SizeEstimate{Min: 0, Max: size}
}

func (sizeEstimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}
