package v1alpha1

// TalosOnlyFieldsMessage refuses a pool of a Kairos class that sets a Talos-only field.
// It is the one message of that refusal: the policy rule talos-only-fields (every
// Kairos class) and render say it, and the CRD rule on NodeGroupSpec, which can only
// name the built-in class kairos, repeats it word for word (a marker cannot name a
// constant; the CRD's tests hold the two equal).
const TalosOnlyFieldsMessage = "spec.osImage, spec.kernelModules, spec.gpus and spec.talos are Talos-only and the pool's class is a Kairos class: remove them, or set spec.nodeGroupClassName to a Talos class"

// talosOnlyFields are the fields of NodeGroupSpec only a Talos pool takes: the JSON name
// (what has() tests in a CEL rule) and whether a spec sets it (what has() sees: an
// omitempty field left empty is absent).
var talosOnlyFields = []struct {
	name string
	set  func(*NodeGroupSpec) bool
}{
	{"osImage", func(s *NodeGroupSpec) bool { return s.OSImage != "" }},
	{"kernelModules", func(s *NodeGroupSpec) bool { return len(s.KernelModules) > 0 }},
	{"gpus", func(s *NodeGroupSpec) bool { return len(s.GPUs) > 0 }},
	{"talos", func(s *NodeGroupSpec) bool { return s.Talos != nil }},
}

// TalosOnlyFields returns the JSON names of the spec fields only a Talos pool takes.
func TalosOnlyFields() []string {
	out := make([]string, len(talosOnlyFields))
	for i, f := range talosOnlyFields {
		out[i] = f.name
	}
	return out
}

// SetTalosOnlyFields returns the JSON names of the Talos-only fields s sets.
func (s *NodeGroupSpec) SetTalosOnlyFields() []string {
	var out []string
	for _, f := range talosOnlyFields {
		if f.set(s) {
			out = append(out, f.name)
		}
	}
	return out
}
