package http

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3.1 document of this API.
//
//go:embed openapi.yaml
var openAPI []byte

// serveOpenAPI handles GET /openapi.yaml.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Write(openAPI) //nolint:errcheck
}
