package operation

import (
	"fmt"
	"slices"
	"strings"
)

// Registry is the checked list of the service's kinds (package catalog
// makes it), which everything generic reads: an operation of a type it does
// not hold is an error everywhere, never taken for another.
type Registry struct {
	kinds  []Kind
	byType map[string]Kind
	// byObject finds the kind of a downstream key by its prefix.
	byObject map[string]Kind
}

// NewRegistry checks kinds and lists them: names the machinery can derive
// from, and no type, id prefix, processor object, path or table used twice.
func NewRegistry(kinds ...Kind) (*Registry, error) {
	r := &Registry{byType: map[string]Kind{}, byObject: map[string]Kind{}}
	prefixes, paths, tables := map[string]string{}, map[string]string{}, map[string]string{}
	for _, k := range kinds {
		n := k.Names()
		if err := n.check(); err != nil {
			return nil, err
		}
		switch {
		case r.byType[n.Type] != nil:
			return nil, fmt.Errorf("type %q is declared twice", n.Type)
		case r.byObject[n.Object] != nil:
			return nil, fmt.Errorf("%s: processor object %q is %s's too", n.Type, n.Object, r.byObject[n.Object].Names().Type)
		case prefixes[n.Prefix] != "":
			return nil, fmt.Errorf("%s: id prefix %q is %s's too", n.Type, n.Prefix, prefixes[n.Prefix])
		case paths[n.Path] != "":
			return nil, fmt.Errorf("%s: path %q is %s's too", n.Type, n.Path, paths[n.Path])
		case tables[n.Table] != "":
			return nil, fmt.Errorf("%s: table %q is %s's too", n.Type, n.Table, tables[n.Table])
		case k.Object() == nil || k.Request() == nil:
			return nil, fmt.Errorf("%s: Object or Request is nil", n.Type)
		}
		if err := checkStates(n, k.States()); err != nil {
			return nil, err
		}
		for _, rule := range k.Errors() {
			if rule.Err == nil || rule.Status < 400 || rule.Code == "" || rule.Title == "" {
				return nil, fmt.Errorf("%s: an error rule lacks its error, status, code or title: %+v", n.Type, rule)
			}
		}
		r.kinds = append(r.kinds, k)
		r.byType[n.Type], r.byObject[n.Object] = k, k
		prefixes[n.Prefix], paths[n.Path], tables[n.Table] = n.Type, n.Type, n.Type
	}
	for _, k := range r.kinds {
		for _, typ := range parentEventTypes(k) {
			if parent, _, _ := strings.Cut(typ, "."); r.byType[parent] == nil {
				return nil, fmt.Errorf("%s: stages %s about its parent, but no kind of type %q is declared", k.Names().Type, typ, parent)
			}
		}
	}
	return r, nil
}

// MustRegistry is NewRegistry for a list fixed in code, which is checked by
// the tests: it panics on a list that NewRegistry refuses.
func MustRegistry(kinds ...Kind) *Registry {
	r, err := NewRegistry(kinds...)
	if err != nil {
		panic(err)
	}
	return r
}

// Kinds are the kinds, in the order they were listed.
func (r *Registry) Kinds() []Kind { return r.kinds }

// Kind is the kind of resource type; an error for a type not declared.
func (r *Registry) Kind(resourceType string) (Kind, error) {
	if k := r.byType[resourceType]; k != nil {
		return k, nil
	}
	return nil, fmt.Errorf("no operation of type %q is declared", resourceType)
}

// ByDownstreamKey is the kind and the id of the operation a downstream key
// names (the inverse of Names.DownstreamKey); false when it names none.
func (r *Registry) ByDownstreamKey(key string) (Kind, string, bool) {
	object, id, ok := strings.Cut(key, "_")
	// An object may hold underscores itself: try each cut.
	for ok {
		if k := r.byObject[object]; k != nil && ValidID(k.Names().Prefix, id) {
			return k, id, true
		}
		var more string
		more, id, ok = strings.Cut(id, "_")
		object += "_" + more
	}
	return nil, "", false
}

// Types are the kinds' types.
func (r *Registry) Types() []string {
	var types []string
	for _, k := range r.kinds {
		types = append(types, k.Names().Type)
	}
	return types
}

// Resources are the kinds' resources.
func (r *Registry) Resources() []Resource {
	var res []Resource
	for _, k := range r.kinds {
		res = append(res, k.Names().Resource())
	}
	return res
}

// EventTypes are the events the kinds stage, which webhook endpoints may ask
// for: each kind's about its own operations, then those about its parents
// that no kind stages before.
func (r *Registry) EventTypes() []string {
	var types []string
	for _, k := range r.kinds {
		types = append(types, EventTypes(k)...)
	}
	for _, k := range r.kinds {
		for _, typ := range parentEventTypes(k) {
			if !slices.Contains(types, typ) {
				types = append(types, typ)
			}
		}
	}
	return types
}

// CrashPoints are the worker's crash points, one per kind.
func (r *Registry) CrashPoints() []string {
	var points []string
	for _, k := range r.kinds {
		points = append(points, k.Names().CrashPoint())
	}
	return points
}

// CreatedPoints are the kinds' recovery points between started and
// finished.
func (r *Registry) CreatedPoints() []string {
	var points []string
	for _, k := range r.kinds {
		points = append(points, k.Names().CreatedPoint())
	}
	return points
}

// ErrorRules are the refusals of every kind's first phase.
func (r *Registry) ErrorRules() []ErrorRule {
	var rules []ErrorRule
	for _, k := range r.kinds {
		rules = append(rules, k.Errors()...)
	}
	return rules
}

// ReviewKinds lists every kind of case in the needs-review queue, for
// metrics that start at zero: the processor events' and, for each kind, its
// give-up and the discrepancies of its ledger.
func (r *Registry) ReviewKinds() []string {
	kinds := []string{ReviewEventContradiction, ReviewEventUnknownOperation}
	for _, k := range r.kinds {
		kinds = append(kinds, k.Names().Reviews().All()...)
	}
	return kinds
}
