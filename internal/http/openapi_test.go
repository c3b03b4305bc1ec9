package http_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v2"

	"github.com/example/payments/internal/catalog"
	httpapi "github.com/example/payments/internal/http"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
	"github.com/example/payments/internal/render"
	"github.com/example/payments/internal/webhooks"
	"github.com/example/payments/tools/fakeprocessor"
	"github.com/example/payments/tools/stacktest"
)

// openAPIDoc is the part of the OpenAPI document the tests compare with the code.
type openAPIDoc struct {
	OpenAPI    string                               `yaml:"openapi"`
	Paths      map[string]map[string]map[string]any `yaml:"paths"`
	Components struct {
		Schemas map[string]schema `yaml:"schemas"`
	} `yaml:"components"`
}

// schema is the part of a JSON Schema the tests read.
type schema struct {
	Required      []string          `yaml:"required"`
	Properties    map[string]schema `yaml:"properties"`
	Items         *schema           `yaml:"items"`
	Enum          []any             `yaml:"enum"`
	Maximum       *int64            `yaml:"maximum"`
	MaxLength     *int              `yaml:"maxLength"`
	MaxItems      *int              `yaml:"maxItems"`
	MaxProperties *int              `yaml:"maxProperties"`
	OneOf         []ref             `yaml:"oneOf"`
}

// ref is a schema that only refers to another.
type ref struct {
	Ref string `yaml:"$ref"`
}

// operationMethods are the keys of a path item that name an operation.
var operationMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// newHandler is the API's router without a database: enough to walk its
// routes and serve the document.
func newHandler(t *testing.T) http.Handler {
	t.Helper()
	s := &httpapi.Server{Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()}
	return s.Handler()
}

// servedYAML fetches GET /openapi.yaml from the router.
func servedYAML(t *testing.T) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	newHandler(t).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.yaml", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /openapi.yaml = %d", rec.Code)
	}
	return rec.Body.Bytes()
}

// servedDoc fetches and parses GET /openapi.yaml from the router.
func servedDoc(t *testing.T) openAPIDoc {
	t.Helper()
	return parseDoc(t, servedYAML(t))
}

func parseDoc(t *testing.T, body []byte) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := yaml.Unmarshal(body, &doc); err != nil {
		t.Fatalf("parse the OpenAPI document: %v", err)
	}
	return doc
}

func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})

	res := s.Request(http.MethodGet, "/openapi.yaml", "", "")
	if res.Status != http.StatusOK {
		t.Fatalf("GET /openapi.yaml = %d %s", res.Status, res.Body)
	}
	if got := res.Header.Get("Content-Type"); got != "application/yaml" {
		t.Errorf("Content-Type = %q, want application/yaml", got)
	}
	if doc := parseDoc(t, res.Body); doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
}

// TestOpenAPIRoutes checks that the document and the router name the same
// operations: chi's patterns use the same {param} syntax as OpenAPI paths.
func TestOpenAPIRoutes(t *testing.T) {
	t.Parallel()
	routes, ok := newHandler(t).(chi.Routes)
	if !ok {
		t.Fatal("Handler() is not a chi.Routes")
	}
	var routed []string
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routed = append(routed, method+" "+route)
		return nil
	})
	if err != nil {
		t.Fatalf("walk routes: %v", err)
	}

	var documented []string
	for path, item := range servedDoc(t).Paths {
		for method := range item {
			if slices.Contains(operationMethods, method) {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	if len(routed) == 0 || len(documented) == 0 {
		t.Fatalf("routed %v, documented %v", routed, documented)
	}
	for _, op := range routed {
		if !slices.Contains(documented, op) {
			t.Errorf("%s is routed but not in openapi.yaml", op)
		}
	}
	for _, op := range documented {
		if !slices.Contains(routed, op) {
			t.Errorf("%s is in openapi.yaml but not routed", op)
		}
	}
	// Every kind's URL, which a key's resource and a 202's Location name, is
	// served.
	for _, k := range catalog.Kinds(nil).Kinds() {
		if op := "GET " + k.Names().Path + "/{id}"; !slices.Contains(routed, op) {
			t.Errorf("%s, the URL of a %s, is not routed", op, k.Names().Type)
		}
	}
}

// The codes the server emits: every rule of the renderer's table (the
// generic ones, each kind's and the endpoints'), each kind's code of a
// failure with no code of its own, the processor's failure codes, which
// become the code of a 402, and the literal codes handed to NewProblem
// (found in the source).
var problemCode = regexp.MustCompile(`(?:render\.)?NewProblem\([^,]+,\s*"([a-z_]+)"`)

// renderer is the API's renderer, as the API process makes it.
func renderer() *render.Renderer {
	return render.New(catalog.Kinds(nil), []operation.Resource{webhooks.Resource}, webhooks.Rules)
}

func TestOpenAPIProblemCodes(t *testing.T) {
	t.Parallel()
	var codes []string
	for _, rule := range renderer().Rules() {
		codes = append(codes, rule.Code)
	}
	for _, k := range catalog.Kinds(nil).Kinds() {
		codes = append(codes, render.FailedCode(k.Names()))
	}
	codes = append(codes, operation.FailureProcessorError)
	codes = append(codes, fakeprocessor.FailureCodes()...)
	for _, file := range []string{"problem.go", "../render/problem.go", "../render/render.go"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range problemCode.FindAllStringSubmatch(string(src), -1) {
			codes = append(codes, m[1])
		}
	}
	// A regexp that stopped matching would make this test pass vacuously.
	for _, want := range []string{"unauthorized", "unsupported_media_type", "invalid_request", "service_unavailable",
		"payment_failed", "refund_failed", "not_found", "card_declined"} {
		if !slices.Contains(codes, want) {
			t.Fatalf("found codes %v, not %s: update the test", codes, want)
		}
	}

	enum := servedDoc(t).Components.Schemas["Problem"].Properties["code"].Enum
	for _, code := range codes {
		if !slices.Contains(enum, any(code)) {
			t.Errorf("code %q is not in the Problem schema's code enum", code)
		}
	}
}

// schemaName is the name of a kind's schemas: Payment, NewPayment.
func schemaName(resourceType string) string {
	var b strings.Builder
	for word := range strings.SplitSeq(resourceType, "_") {
		b.WriteString(strings.ToUpper(word[:1]) + word[1:])
	}
	return b.String()
}

// TestOpenAPISchemas checks the schemas' property names against the JSON
// names of the types they describe, and the limits against the package's.
func TestOpenAPISchemas(t *testing.T) {
	t.Parallel()
	schemas := servedDoc(t).Components.Schemas

	described := map[string]any{
		"Event": operation.Event{},

		"WebhookEndpoint":        webhooks.Endpoint{},
		"NewWebhookEndpoint":     webhooks.NewEndpoint{},
		"WebhookEndpointUpdate":  webhooks.Update{},
		"WebhookSecretRotation":  webhooks.Rotation{},
		"WebhookResend":          webhooks.Resend{},
		"WebhookDelivery":        webhooks.Delivery{},
		"WebhookDeliveryAttempt": webhooks.Attempt{},
	}
	responses := slices.Clone(responseSchemas)
	// A problem carries the failed operation under its type's name.
	problem, _ := jsonNames(reflect.TypeOf(render.Problem{}))
	for _, k := range catalog.Kinds(nil).Kinds() {
		name := schemaName(k.Names().Type)
		described[name], described["New"+name] = k.Object(), k.Request()
		responses = append(responses, name)
		problem = append(problem, k.Names().Type)
		if _, ok := schemas[name+"Problem"]; !ok {
			t.Errorf("no schema %sProblem: the problem carrying a failed %s", name, k.Names().Type)
		}
	}
	slices.Sort(problem)
	if got := sortedKeys(schemas["Problem"].Properties); !slices.Equal(got, problem) {
		t.Errorf("Problem properties = %v, want %v", got, problem)
	}
	for name, v := range described {
		s, ok := schemas[name]
		if !ok {
			t.Errorf("no schema %s", name)
			continue
		}
		fields, always := jsonNames(reflect.TypeOf(v))
		if got := sortedKeys(s.Properties); !slices.Equal(got, fields) {
			t.Errorf("%s properties = %v, want %v", name, got, fields)
		}
		// Response objects always carry every field without omitempty.
		if slices.Contains(responses, name) {
			if got := slices.Sorted(slices.Values(s.Required)); !slices.Equal(got, always) {
				t.Errorf("%s required = %v, want %v", name, got, always)
			}
		}
	}

	np := schemas["NewPayment"].Properties
	checkLimit(t, "NewPayment.amount maximum", np["amount"].Maximum, payments.MaxAmount)
	checkLimit(t, "NewPayment.payment_method maxLength", np["payment_method"].MaxLength, payments.MaxPaymentMethod)
	checkLimit(t, "NewPayment.description maxLength", np["description"].MaxLength, payments.MaxDescription)
	checkLimit(t, "NewPayment.metadata maxProperties", np["metadata"].MaxProperties, payments.MaxMetadataPairs)
	checkLimit(t, "NewRefund.amount maximum", schemas["NewRefund"].Properties["amount"].Maximum, payments.MaxAmount)

	want := []any{nil}
	for _, r := range refunds.Reasons {
		want = append(want, r)
	}
	for _, name := range []string{"NewRefund", "Refund"} {
		checkEnum(t, name+".reason", schemas[name].Properties["reason"].Enum, want)
	}

	ne, eu := schemas["NewWebhookEndpoint"].Properties, schemas["WebhookEndpointUpdate"].Properties
	checkLimit(t, "NewWebhookEndpoint.description maxLength", ne["description"].MaxLength, webhooks.MaxDescription)
	checkLimit(t, "WebhookEndpointUpdate.description maxLength", eu["description"].MaxLength, webhooks.MaxDescription)
	checkLimit(t, "NewWebhookEndpoint.enabled_events maxItems", ne["enabled_events"].MaxItems, webhooks.MaxEnabledEvents)
	checkLimit(t, "WebhookEndpointUpdate.enabled_events maxItems", eu["enabled_events"].MaxItems, webhooks.MaxEnabledEvents)
	checkLimit(t, "WebhookSecretRotation.expire_current_secret_in maximum",
		schemas["WebhookSecretRotation"].Properties["expire_current_secret_in"].Maximum, int64(webhooks.MaxGrace/time.Second))

	eventTypes := []any{"*"}
	for _, typ := range catalog.Kinds(nil).EventTypes() {
		eventTypes = append(eventTypes, typ)
	}
	for _, name := range []string{"NewWebhookEndpoint", "WebhookEndpointUpdate", "WebhookEndpoint"} {
		what := name + ".enabled_events items"
		if items := schemas[name].Properties["enabled_events"].Items; items == nil {
			t.Errorf("%s are missing", what)
		} else {
			checkEnum(t, what+" enum", items.Enum, eventTypes)
		}
	}
	// Every event type an endpoint may ask for is one an event may have.
	checkEnum(t, "Event.type", schemas["Event"].Properties["type"].Enum, eventTypes[1:])
	checkEnum(t, "WebhookEndpoint.status", schemas["WebhookEndpoint"].Properties["status"].Enum,
		[]any{webhooks.StatusEnabled, webhooks.StatusDisabled})
	checkEnum(t, "WebhookEndpointUpdate.status", schemas["WebhookEndpointUpdate"].Properties["status"].Enum,
		[]any{webhooks.StatusEnabled, webhooks.StatusDisabled})
	checkEnum(t, "WebhookDelivery.status", schemas["WebhookDelivery"].Properties["status"].Enum,
		[]any{webhooks.DeliveryPending, webhooks.DeliveryDelivered, webhooks.DeliveryFailed})
}

// TestOpenAPIFollowsTheKinds: every part of the document that lists the
// kinds, or their events, lists exactly the declared ones: a webhook entry
// for each event type, carrying its kind's object; the objects an event may
// carry; the recovery points of a key; the types of the resources a key
// names; and the values of every query parameter named type. (The event
// type enums of the endpoints' schemas and the Problem's members are
// checked by TestOpenAPISchemas.)
func TestOpenAPIFollowsTheKinds(t *testing.T) {
	t.Parallel()
	var doc struct {
		Paths    map[string]map[string]any `yaml:"paths"`
		Webhooks map[string]struct {
			Post struct {
				OperationID string `yaml:"operationId"`
				RequestBody struct {
					Content map[string]struct {
						Schema struct {
							AllOf []struct {
								ref        `yaml:",inline"`
								Properties struct {
									Type struct {
										Const string `yaml:"const"`
									} `yaml:"type"`
									Data struct {
										Properties struct {
											Object ref `yaml:"object"`
										} `yaml:"properties"`
									} `yaml:"data"`
								} `yaml:"properties"`
							} `yaml:"allOf"`
						} `yaml:"schema"`
					} `yaml:"content"`
				} `yaml:"requestBody"`
			} `yaml:"post"`
		} `yaml:"webhooks"`
	}
	served := servedYAML(t)
	if err := yaml.Unmarshal(served, &doc); err != nil {
		t.Fatal(err)
	}
	kinds := catalog.Kinds(nil)
	var eventTypes, objects []any
	for _, k := range kinds.Kinds() {
		objects = append(objects, "#/components/schemas/"+schemaName(k.Names().Type))
	}
	// Every event carries the object of the kind its type names: an
	// operation's own, or its parent's.
	for _, typ := range kinds.EventTypes() {
		resourceType, _, _ := strings.Cut(typ, ".")
		k, err := kinds.Kind(resourceType)
		if err != nil {
			t.Errorf("event %s: %v", typ, err)
			continue
		}
		schemaRef := "#/components/schemas/" + schemaName(k.Names().Type)
		eventTypes = append(eventTypes, typ)
		hook, ok := doc.Webhooks[typ]
		if !ok {
			t.Errorf("webhooks: no entry for %s", typ)
			continue
		}
		if want := strings.ReplaceAll(typ, ".", "_") + "_webhook"; hook.Post.OperationID != want {
			t.Errorf("webhooks.%s operationId = %q, want %q", typ, hook.Post.OperationID, want)
		}
		body := hook.Post.RequestBody.Content["application/json"].Schema.AllOf
		if len(body) != 2 || body[0].Ref != "#/components/schemas/Event" || body[1].Properties.Type.Const != typ ||
			body[1].Properties.Data.Properties.Object.Ref != schemaRef {
			t.Errorf("webhooks.%s: the body is not an Event of type %s carrying a %s (%s)", typ, typ, k.Names().Type, schemaRef)
		}
	}
	for typ := range doc.Webhooks {
		if !slices.Contains(eventTypes, any(typ)) {
			t.Errorf("webhooks: %s is not an event type of a declared kind", typ)
		}
	}
	schemas := parseDoc(t, served).Components.Schemas
	var carried []any
	for _, r := range schemas["Event"].Properties["data"].Properties["object"].OneOf {
		carried = append(carried, r.Ref)
	}
	checkEnum(t, "Event.data.object oneOf", carried, objects)
	points := []any{idempotency.RecoveryStarted, idempotency.RecoveryFinished, idempotency.RecoveryExpired}
	for _, p := range kinds.CreatedPoints() {
		points = append(points, p)
	}
	checkEnum(t, "IdempotencyKey.recovery_point", schemas["IdempotencyKey"].Properties["recovery_point"].Enum, points)
	resources := []any{webhooks.Resource.Type}
	for _, typ := range kinds.Types() {
		resources = append(resources, typ)
	}
	checkEnum(t, "ResourceRef.type", schemas["ResourceRef"].Properties["type"].Enum, resources)
	typed := 0
	for path, item := range doc.Paths {
		for method, op := range item {
			b, _ := yaml.Marshal(op)
			var params struct {
				Parameters []struct {
					Name, In string
					Schema   schema
				}
			}
			_ = yaml.Unmarshal(b, &params)
			for _, p := range params.Parameters {
				if p.Name == "type" && p.In == "query" {
					typed++
					checkEnum(t, method+" "+path+" type", p.Schema.Enum, eventTypes)
				}
			}
		}
	}
	if typed == 0 {
		t.Error("no query parameter named type: the check is vacuous")
	}
}

// responseSchemas are the schemas of response objects besides the kinds',
// which always carry every field without omitempty, so the schema must
// require exactly those.
var responseSchemas = []string{"Event", "WebhookEndpoint", "WebhookDelivery", "WebhookDeliveryAttempt"}

func checkEnum(t *testing.T, what string, got, want []any) {
	t.Helper()
	if len(got) != len(want) || !containsAll(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// jsonNames returns the sorted JSON names of t's fields, those of an
// embedded struct among them, and those of them that are always encoded.
func jsonNames(t reflect.Type) (all, always []string) {
	for _, f := range reflect.VisibleFields(t) {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous || !f.IsExported() || name == "" || name == "-" {
			continue
		}
		all = append(all, name)
		if !strings.Contains(opts, "omitempty") {
			always = append(always, name)
		}
	}
	sort.Strings(all)
	sort.Strings(always)
	return all, always
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func checkLimit[N int | int64](t *testing.T, what string, got *N, want N) {
	t.Helper()
	switch {
	case got == nil:
		t.Errorf("%s is missing, want %d", what, want)
	case *got != want:
		t.Errorf("%s = %d, want %d", what, *got, want)
	}
}

func containsAll(got, want []any) bool {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}
