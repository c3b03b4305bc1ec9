// Package deploy holds what runs the service outside make run: the compose
// file's checks here, Prometheus's configuration and rules in prometheus/,
// Grafana's provisioning and dashboard in grafana/.
package deploy

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
	"gopkg.in/yaml.v2"

	"github.com/example/payments/internal/process"
)

// service is what these tests read of a compose service.
type service struct {
	Profiles    []string
	Environment map[string]string
	Ports       []string
	Volumes     []string
	Healthcheck struct{ Test []string }
	DependsOn   map[string]struct{ Condition string } `yaml:"depends_on"`
	StopGrace   string                                `yaml:"stop_grace_period"`
}

// composeFile reads docker-compose.yml, its anchors and merge keys resolved.
func composeFile(t *testing.T) map[string]service {
	t.Helper()
	b, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Services map[string]service }
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	return file.Services
}

// programs are the services running the binaries, each with a health check.
var programs = []string{"processor", "worker", "api", "receiver"}

// TestCompose: docker-compose.yml runs the programs as make run does, and
// stops them as gracefully: each has a health check (with the image's
// healthcheck binary), a stop grace period longer than SHUTDOWN_TIMEOUT,
// and waits for what it needs to be healthy or done; the worker's internal
// port, with River's dashboard, is published; the observability profile
// adds Prometheus with this directory's configuration, Grafana with the
// dashboard, and Jaeger, at which the programs' OTLP exporters point.
func TestCompose(t *testing.T) {
	t.Parallel()
	services := composeFile(t)
	var common process.Common
	if err := envconfig.Process("payments_compose_test_unset", &common); err != nil {
		t.Fatal(err)
	}
	for _, name := range programs {
		s, ok := services[name]
		if !ok {
			t.Errorf("no service %s", name)
			continue
		}
		if len(s.Healthcheck.Test) < 3 || s.Healthcheck.Test[1] != "/usr/local/bin/healthcheck" {
			t.Errorf("%s: health check %v, want the healthcheck binary on a URL", name, s.Healthcheck.Test)
		}
		if grace, err := time.ParseDuration(s.StopGrace); err != nil || grace <= common.ShutdownTimeout {
			t.Errorf("%s: stop_grace_period %q, want more than SHUTDOWN_TIMEOUT (%s)", name, s.StopGrace, common.ShutdownTimeout)
		}
		for dep, d := range s.DependsOn {
			if d.Condition != "service_healthy" && d.Condition != "service_completed_successfully" {
				t.Errorf("%s: depends on %s with condition %q", name, dep, d.Condition)
			}
		}
		if name != "receiver" && s.Environment["OTEL_EXPORTER_OTLP_ENDPOINT"] != "http://jaeger:4317" {
			t.Errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT %q, want the jaeger service", name, s.Environment["OTEL_EXPORTER_OTLP_ENDPOINT"])
		}
	}
	if w := services["worker"]; !slices.Contains(w.Ports, "127.0.0.1:9091:9091") || w.Environment["METRICS_ADDR"] != ":9091" ||
		w.Environment["RIVER_UI_PASSWORD"] == "" || len(w.DependsOn) == 0 {
		t.Errorf("worker: ports %v, METRICS_ADDR %q, RIVER_UI_PASSWORD set %v: want :9091 published with River's dashboard",
			w.Ports, w.Environment["METRICS_ADDR"], w.Environment["RIVER_UI_PASSWORD"] != "")
	}
	for name, mounts := range map[string][]string{
		"prometheus": {"./deploy/prometheus:/etc/prometheus:ro"},
		"grafana":    {"./deploy/grafana/provisioning:/etc/grafana/provisioning:ro", "./deploy/grafana/dashboards:/var/lib/grafana/dashboards:ro"},
		"jaeger":     nil,
	} {
		s := services[name]
		if !slices.Equal(s.Profiles, []string{"observability"}) {
			t.Errorf("%s: profiles %v, want observability", name, s.Profiles)
		}
		for _, m := range mounts {
			if !slices.Contains(s.Volumes, m) {
				t.Errorf("%s: volumes %v lack %s", name, s.Volumes, m)
			}
		}
	}
}

// TestPrometheusTargets: prometheus.yml scrapes the compose services, each
// at the port its internal listener is given there.
func TestPrometheusTargets(t *testing.T) {
	t.Parallel()
	services := composeFile(t)
	b, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string                       `yaml:"job_name"`
			StaticConfigs []struct{ Targets []string } `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	// The processor's internal listener is :9093 by default.
	ports := map[string]string{"api": services["api"].Environment["API_INTERNAL_ADDR"], "worker": services["worker"].Environment["METRICS_ADDR"], "processor": ":9093"}
	var jobs []string
	for _, sc := range cfg.ScrapeConfigs {
		jobs = append(jobs, sc.JobName)
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				host, port, _ := strings.Cut(target, ":")
				if ports[host] != ":"+port {
					t.Errorf("job %s scrapes %s; the compose service %s listens internally on %q", sc.JobName, target, host, ports[host])
				}
			}
		}
	}
	if !slices.Equal(jobs, []string{"api", "worker", "fakeprocessor"}) {
		t.Errorf("jobs %v, want api, worker and fakeprocessor (the alerts name them)", jobs)
	}
}

// TestComposeConfig: docker-compose accepts the file, with and without the
// observability profile. There is no engine here to run it: this checks
// what compose itself checks (keys, conditions, profiles, interpolation).
func TestComposeConfig(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Skip("docker-compose is not installed (apt-get install docker-compose): docker-compose.yml not validated by compose itself")
	}
	for _, args := range [][]string{{"config", "-q"}, {"--profile", "observability", "config", "-q"}} {
		cmd := exec.Command(bin, append([]string{"-f", "../docker-compose.yml"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("docker-compose %v: %v\n%s", args, err, out)
		}
	}
}
