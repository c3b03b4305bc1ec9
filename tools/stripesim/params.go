package stripesim

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Stripe's limits on metadata.
const (
	maxMetadataKeys   = 50
	maxMetadataKey    = 40
	maxMetadataValue  = 500
	metadataParameter = "metadata"
)

// form reads an endpoint's parameters. The first error is kept in err and
// every later read returns a zero value, so that an endpoint reads them
// all, then checks err once.
type form struct {
	v   url.Values
	err *apiError
}

// params returns the request's parameters, refusing any that allowed does
// not name, as Stripe does ("Received unknown parameter"). An allowed name
// ending in [] takes any subscript: metadata[] takes metadata[order].
func (c *call) params(allowed ...string) *form {
	f := &form{v: c.form}
	for _, name := range slices.Sorted(maps.Keys(c.form)) {
		base, _, sub := strings.Cut(name, "[")
		if slices.Contains(allowed, name) || (sub && slices.Contains(allowed, base+"[]")) {
			continue
		}
		f.fail(badRequest(name, "parameter_unknown", "Received unknown parameter: "+name))
		break
	}
	return f
}

// fail keeps err unless an earlier error was kept.
func (f *form) fail(err *apiError) {
	if f.err == nil {
		f.err = err
	}
}

// str is parameter name, "" if absent.
func (f *form) str(name string) string { return f.v.Get(name) }

// required is parameter name, which must be there.
func (f *form) required(name string) string {
	v := f.v.Get(name)
	if v == "" {
		f.fail(badRequest(name, "parameter_missing", "Missing required param: "+name+"."))
	}
	return v
}

// integer is parameter name as an integer, and whether it was there.
func (f *form) integer(name string) (int64, bool) {
	v := f.v.Get(name)
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		f.fail(badRequest(name, "parameter_invalid_integer", "Invalid integer: "+v))
	}
	return n, true
}

// requiredInteger is parameter name as an integer, which must be there.
func (f *form) requiredInteger(name string) int64 {
	if f.required(name) == "" {
		return 0
	}
	n, _ := f.integer(name)
	return n
}

// boolean is parameter name as a boolean, false if absent.
func (f *form) boolean(name string) bool {
	switch v := f.v.Get(name); v {
	case "", "false":
		return false
	case "true":
		return true
	default:
		f.fail(badRequest(name, "", "Invalid boolean: "+v))
		return false
	}
}

// oneOf is parameter name, "" if absent, which must be one of values.
func (f *form) oneOf(name string, values ...string) string {
	v := f.v.Get(name)
	if v != "" && !slices.Contains(values, v) {
		f.fail(badRequest(name, "", fmt.Sprintf("Invalid %s: must be one of %s", name, strings.Join(values, ", "))))
	}
	return v
}

// list is array parameter name, name[0], name[1]… in order of their
// index, or name[] in the order sent.
func (f *form) list(name string) []string {
	type item struct {
		index int
		value string
	}
	var items []item
	for _, key := range slices.Sorted(maps.Keys(f.v)) {
		values := f.v[key]
		sub, ok := strings.CutPrefix(key, name+"[")
		if !ok || !strings.HasSuffix(sub, "]") {
			continue
		}
		sub = strings.TrimSuffix(sub, "]")
		index := -1
		if sub != "" {
			n, err := strconv.Atoi(sub)
			if err != nil || n < 0 {
				f.fail(badRequest(key, "", "Invalid array index: "+key))
				return nil
			}
			index = n
		}
		for _, v := range values {
			items = append(items, item{index, v})
		}
	}
	slices.SortStableFunc(items, func(a, b item) int { return a.index - b.index })
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.value
	}
	return out
}

// metadata is the metadata[key] parameters, within Stripe's limits. An
// empty value sets nothing, as on Stripe's creates.
func (f *form) metadata() map[string]string {
	m := map[string]string{}
	for _, key := range slices.Sorted(maps.Keys(f.v)) {
		values := f.v[key]
		k, ok := strings.CutPrefix(key, metadataParameter+"[")
		if !ok {
			continue
		}
		k = strings.TrimSuffix(k, "]")
		v := values[len(values)-1]
		switch {
		case k == "" || strings.ContainsAny(k, "[]"):
			f.fail(badRequest(key, "", "Invalid metadata key: "+key))
		case len(k) > maxMetadataKey:
			f.fail(badRequest(key, "", fmt.Sprintf("Metadata keys can have up to %d characters; %q has %d.", maxMetadataKey, k, len(k))))
		case len(v) > maxMetadataValue:
			f.fail(badRequest(key, "", fmt.Sprintf("Metadata values can have up to %d characters; the value of %q has %d.", maxMetadataValue, k, len(v))))
		case v != "":
			m[k] = v
		}
	}
	if len(m) > maxMetadataKeys {
		f.fail(badRequest(metadataParameter, "", fmt.Sprintf("Metadata can have up to %d keys; it has %d.", maxMetadataKeys, len(m))))
	}
	return m
}
