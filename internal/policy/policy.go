// Package policy holds the admission rules of a pool, written once in CEL and evaluated
// by both the validating webhook and the reconciler (its second line of defence): the
// built-in rules (no switch between Talos and Kairos while machines run, Talos-only fields,
// location access, Kubernetes version) and the poolRules a NodeGroupClass carries.
//
// The objects are declared as dyn and fed as the maps runtime.DefaultUnstructuredConverter
// makes of them, the way a Kubernetes ValidatingAdmissionPolicy sees them: JSON field names,
// quantities and durations as strings, and an unset optional field absent, so `has()` means
// what it means in the CRD's own rules and a platform can move a rule between a class and
// a policy unchanged. Typed declarations would need CEL types of our API (proto messages,
// or a provider built from the CRD schema, which is what k8s.io/apiserver's CEL library
// does); cel-go's native Go types would show Kubernetes' Go shapes (a Quantity as a struct
// of unexported fields) rather than the API's. What dyn costs, and how it is made up for:
// a typo in a field name is found when the rule runs, not when it compiles, and such a run
// refuses the pool with the error (fail closed); the checker cannot know how long a field
// is, so the cost estimate of a class rule reads size hints that repeat the CRD's caps
// (sizeHints); a class rule must still have the static type bool.
//
// Every expression is compiled once: the built-in rules when the package loads, a class
// rule the first time its text is seen (CompileClassRules or Evaluate), then cached by
// text. Evaluation is bounded four ways: a class rule whose worst-case cost exceeds
// RuleCostLimit is refused when the class is created; every program stops at
// RuleCostLimit at runtime (the pool's data may exceed the size hints: annotations are
// not capped); one Evaluate stops after EvaluationCostBudget in total or after
// EvaluationTimeout, whichever comes first; and the caller's context interrupts
// comprehensions.
package policy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
)

// Input is a pool and what its rules are evaluated against.
type Input struct {
	// Object is the pool; required.
	Object *v1.NodeGroup
	// OldObject is the pool before an update; nil on create and in the reconciler.
	OldObject *v1.NodeGroup
	// Class is the spec of the pool's class; required. A built-in class is passed as
	// resolve.BuiltinClass resolves it from code.
	Class *v1.NodeGroupClassSpec
	// OldClass is the class the pool's machines were built from, nil when there is none.
	// Gather sets {OS: the OS the live MachineDeployment boots}, which is all the
	// os-switch rule reads; the webhook passes the class of OldObject instead.
	OldClass *v1.NodeGroupClassSpec
	// Location is the spec of the pool's location; required.
	Location *v1.LocationSpec
	// NamespaceLabels are the labels of the pool's namespace.
	NamespaceLabels map[string]string
	// MachineDeploymentExists is true when the pool's MachineDeployment exists: its
	// machines run and its OS cannot change.
	MachineDeploymentExists bool
	// ControlPlaneVersion is the Kubernetes release of the pool's control plane, such as
	// v1.35.4; empty when it is not known yet.
	ControlPlaneVersion string
	// MachineCluster is the Cluster API Cluster the pool's live MachineDeployment runs
	// under (its spec.clusterName), empty when there is none; Cluster is the one the
	// pool's machines run under at its location (names.MachineClusterName): the tenant's
	// Cluster, or its satellite on a Proxmox location.
	MachineCluster string
	Cluster        string
}

// Violation is a rule the pool breaks.
type Violation struct {
	// Rule is the name of a built-in rule, or poolRules[i] of the pool's class.
	Rule string
	// Field is the path of the field to change, such as spec.kubernetesVersion.
	Field string
	// Message says what is wrong and how to fix it.
	Message string
}

func (v Violation) String() string { return v.Field + ": " + v.Message }

// Evaluate runs the built-in rules and the class's poolRules against the pool and returns
// the rules it breaks, in order; none means it is admitted. A rule that cannot be
// evaluated (a runtime error, its cost limit, a class rule that does not compile) is a
// Violation that says so, and so is running out of EvaluationCostBudget or
// EvaluationTimeout (the rules left are then not run): a pool is never admitted by a rule
// that did not run. Evaluate returns an error only for a missing input or when ctx ends.
func Evaluate(ctx context.Context, in Input) ([]Violation, error) {
	vars, err := activation(in)
	if err != nil {
		return nil, err
	}
	ectx, cancel := context.WithTimeoutCause(ctx, evaluationTimeout, errTimeout)
	defer cancel()
	e := &evaluation{ctx: ectx, vars: vars}
	for _, r := range compiledBuiltins {
		if !e.run(r.Name, r.Field, r.Message, r.prog) {
			return e.stop(ctx)
		}
	}
	for i, pr := range in.Class.PoolRules {
		name := fmt.Sprintf("poolRules[%d]", i)
		if i >= MaxPoolRules {
			e.refuse(name, "spec.nodeGroupClassName", fmt.Sprintf("the pool's class has more than %d spec.poolRules, so the pool is refused: ask the platform to fix the class", MaxPoolRules))
			break
		}
		prog, err := poolRuleProgram(pr.Rule)
		if err != nil {
			e.refuse(name, "spec.nodeGroupClassName", fmt.Sprintf("the pool's class has an invalid spec.poolRules[%d] (%v), so the pool is refused: ask the platform to fix the class", i, err))
			continue
		}
		if !e.run(name, "spec", pr.Message, prog) {
			return e.stop(ctx)
		}
	}
	return e.out, nil
}

var (
	errBudget  = errors.New("cost budget spent")
	errTimeout = errors.New("evaluation timeout")
	// evaluationTimeout is EvaluationTimeout; tests shorten it.
	evaluationTimeout = EvaluationTimeout
)

// evaluation is one Evaluate: its variables, the violations so far and the cost spent.
type evaluation struct {
	ctx   context.Context
	vars  interpreter.Activation
	out   []Violation
	spent uint64
	// halt is why the rules left are not run: errBudget, errTimeout, or the caller's
	// context ending; haltRule is the rule that was running.
	halt     error
	haltRule string
}

func (e *evaluation) refuse(rule, field, message string) {
	e.out = append(e.out, Violation{Rule: rule, Field: field, Message: message})
}

// run evaluates one rule and records a violation; false means stop.
func (e *evaluation) run(name, field, message string, prog cel.Program) bool {
	if e.spent > EvaluationCostBudget {
		e.halt, e.haltRule = errBudget, name
		return false
	}
	val, det, err := prog.ContextEval(e.ctx, e.vars)
	if det != nil && det.ActualCost() != nil {
		e.spent += *det.ActualCost()
	}
	switch {
	case err != nil && e.ctx.Err() != nil:
		e.halt, e.haltRule = context.Cause(e.ctx), name
		return false
	case err != nil:
		e.refuse(name, field, fmt.Sprintf("rule %s could not be evaluated (%v), so the pool is refused: %s", name, err, message))
	case val.Type() != types.BoolType:
		e.refuse(name, field, fmt.Sprintf("rule %s returned %s, not a bool, so the pool is refused: %s", name, val.Type().TypeName(), message))
	case val != types.True:
		e.refuse(name, field, message)
	}
	return true
}

// stop ends an evaluation that could not run every rule.
func (e *evaluation) stop(caller context.Context) ([]Violation, error) {
	switch {
	case caller.Err() != nil:
		return nil, fmt.Errorf("policy: evaluation stopped: %w", context.Cause(caller))
	case errors.Is(e.halt, errBudget):
		e.refuse("cost-budget", "spec.nodeGroupClassName", fmt.Sprintf("the pool's rules spent their cost budget (%d) before %s ran, so the pool is refused: ask the platform to simplify the class's spec.poolRules", EvaluationCostBudget, e.haltRule))
	default:
		e.refuse("timeout", "spec.nodeGroupClassName", fmt.Sprintf("the pool's rules did not finish within %v (%s was running), so the pool is refused: ask the platform to simplify the class's spec.poolRules, or make the pool's lists and maps shorter", evaluationTimeout, e.haltRule))
	}
	return e.out, nil
}

// CompileClassRules checks a class's poolRules as the class is created: each must compile
// against the pool (`object`, and `oldObject` on update), return bool, and have a
// worst-case cost within RuleCostLimit. The error names each rule that fails.
func CompileClassRules(rules []v1.PoolRule) error {
	if len(rules) > MaxPoolRules {
		return fmt.Errorf("spec.poolRules has %d rules, more than %d", len(rules), MaxPoolRules)
	}
	var errs []error
	for i, r := range rules {
		if _, err := poolRuleProgram(r.Rule); err != nil {
			errs = append(errs, fmt.Errorf("spec.poolRules[%d].rule: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// activation converts the inputs to the maps and values the rules see.
func activation(in Input) (interpreter.Activation, error) {
	if in.Object == nil || in.Class == nil || in.Location == nil {
		return nil, errors.New("policy: Input.Object, Input.Class and Input.Location are required")
	}
	vars := map[string]any{
		VarNamespaceLabels:         in.NamespaceLabels,
		VarMachineDeploymentExists: in.MachineDeploymentExists,
		VarControlPlaneVersion:     in.ControlPlaneVersion,
		VarMachineCluster:          in.MachineCluster,
		VarCluster:                 in.Cluster,
	}
	if in.NamespaceLabels == nil {
		vars[VarNamespaceLabels] = map[string]string{}
	}
	for name, obj := range map[string]any{
		VarObject: in.Object, VarOldObject: in.OldObject,
		VarClass: in.Class, VarOldClass: in.OldClass,
		VarLocation: in.Location,
	} {
		m, err := toMap(obj)
		if err != nil {
			return nil, fmt.Errorf("policy: converting %s: %w", name, err)
		}
		vars[name] = m
	}
	return interpreter.NewActivation(vars)
}

// toMap converts a typed object to its JSON-shaped map; a nil pointer becomes CEL null.
func toMap(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1.NodeGroup:
		if o == nil {
			return nil, nil
		}
	case *v1.NodeGroupClassSpec:
		if o == nil {
			return nil, nil
		}
	case *v1.LocationSpec:
		if o == nil {
			return nil, nil
		}
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

// compiledRule is a built-in rule and its program.
type compiledRule struct {
	Rule
	prog cel.Program
}

var (
	compiledBuiltins = mustCompileBuiltins()
	poolEnv          = must(poolRuleEnv())
)

func mustCompileBuiltins() []compiledRule {
	env := must(builtinEnv())
	out := make([]compiledRule, 0, len(builtinRules))
	for _, r := range builtinRules {
		ast, iss := env.Compile(r.Expression)
		if iss.Err() != nil {
			panic(fmt.Sprintf("policy: built-in rule %s: %v", r.Name, iss.Err()))
		}
		if ast.OutputType() != cel.BoolType {
			panic(fmt.Sprintf("policy: built-in rule %s returns %s", r.Name, ast.OutputType()))
		}
		out = append(out, compiledRule{Rule: r, prog: must(env.Program(ast, programOptions...))})
	}
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("policy: %v", err))
	}
	return v
}

// maxCachedRules bounds the cache of class rules; past it the cache starts over, so a
// stream of distinct rule texts costs compilations, never unbounded memory.
const maxCachedRules = 4096

type compiledPoolRule struct {
	prog cel.Program
	err  error
}

var (
	poolRulesMu sync.RWMutex
	poolRules   = map[string]compiledPoolRule{}
)

// poolRuleProgram returns the program of a class rule, compiling it the first time.
func poolRuleProgram(rule string) (cel.Program, error) {
	poolRulesMu.RLock()
	c, ok := poolRules[rule]
	poolRulesMu.RUnlock()
	if ok {
		return c.prog, c.err
	}
	c.prog, c.err = compilePoolRule(rule)
	poolRulesMu.Lock()
	if len(poolRules) >= maxCachedRules {
		clear(poolRules)
	}
	poolRules[rule] = c
	poolRulesMu.Unlock()
	return c.prog, c.err
}

func compilePoolRule(rule string) (prog cel.Program, err error) {
	// cel-go has had panics on odd input in its checkers (see library); a rule text is
	// the platform's input, so one is an invalid rule, not a crash of the webhook.
	defer func() {
		if r := recover(); r != nil {
			prog, err = nil, fmt.Errorf("the rule could not be compiled: %v", r)
		}
	}()
	if len(rule) > MaxRuleLength {
		return nil, fmt.Errorf("the rule is %d bytes long, more than %d", len(rule), MaxRuleLength)
	}
	ast, iss := poolEnv.Compile(rule)
	if iss.Err() != nil {
		return nil, fmt.Errorf("the rule does not compile: %w", iss.Err())
	}
	if ast.OutputType() != cel.BoolType {
		return nil, fmt.Errorf("the rule returns %s, not bool: compare the value, such as `object.spec.maxReplicas <= 10`", cel.FormatCELType(ast.OutputType()))
	}
	est, err := poolEnv.EstimateCost(ast, sizeEstimator{})
	if err != nil {
		return nil, fmt.Errorf("the rule's cost cannot be estimated: %w", err)
	}
	if est.Max == math.MaxUint64 {
		return nil, fmt.Errorf("the rule's cost has no bound (it loops over something of unknown size): loop over fields of the pool, or fewer nested")
	}
	if est.Max > RuleCostLimit {
		return nil, fmt.Errorf("the rule's worst-case cost %d exceeds the limit %d: loop over fewer or smaller fields, or nest fewer loops", est.Max, RuleCostLimit)
	}
	if prog, err = poolEnv.Program(ast, programOptions...); err != nil {
		return nil, fmt.Errorf("the rule could not be planned: %w", err)
	}
	return prog, nil
}

// LocationAdmits reports whether a location admits a namespace with the given labels:
// the location-access rule alone, the one Evaluate runs for a pool, so a tool that
// shows which locations a namespace may use answers as the webhook would.
func LocationAdmits(ctx context.Context, location *v1.LocationSpec, namespaceLabels map[string]string) (bool, error) {
	vars, err := activation(Input{Object: &v1.NodeGroup{}, Class: &v1.NodeGroupClassSpec{}, Location: location, NamespaceLabels: namespaceLabels})
	if err != nil {
		return false, err
	}
	for _, r := range compiledBuiltins {
		if r.Name == RuleLocationAccess {
			val, _, err := r.prog.ContextEval(ctx, vars)
			if err != nil {
				return false, fmt.Errorf("policy: rule %s: %w", r.Name, err)
			}
			return val == types.True, nil
		}
	}
	return false, fmt.Errorf("policy: no rule %s", RuleLocationAccess)
}
