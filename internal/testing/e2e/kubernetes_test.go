package e2e

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/compactord/compactord/internal/daemon"
)

var update = flag.Bool("update", false, "rewrite generated deploy files (deploy/kubernetes/prometheusrule.yaml)")

// k8sObject is the part of a Kubernetes object these checks read.
type k8sObject struct {
	APIVersion string         `yaml:"apiVersion"`
	Kind       string         `yaml:"kind"`
	Metadata   k8sMeta        `yaml:"metadata"`
	Data       map[string]any `yaml:"data"`
	StringData map[string]any `yaml:"stringData"`
	Spec       yaml.Node      `yaml:"spec"`
}

type k8sMeta struct {
	Name        string            `yaml:"name"`
	Namespace   string            `yaml:"namespace"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type deploymentSpec struct {
	Replicas int `yaml:"replicas"`
	Selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
	Template struct {
		Metadata k8sMeta `yaml:"metadata"`
		Spec     podSpec `yaml:"spec"`
	} `yaml:"template"`
}

type podSpec struct {
	TerminationGracePeriodSeconds int         `yaml:"terminationGracePeriodSeconds"`
	InitContainers                []container `yaml:"initContainers"`
	Containers                    []container `yaml:"containers"`
	SecurityContext               struct {
		RunAsNonRoot bool `yaml:"runAsNonRoot"`
		RunAsUser    int  `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	Volumes []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
}

type container struct {
	Name          string   `yaml:"name"`
	Image         string   `yaml:"image"`
	RestartPolicy string   `yaml:"restartPolicy"`
	Args          []string `yaml:"args"`
	Env           []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			ResourceFieldRef *struct {
				ContainerName string `yaml:"containerName"`
				Resource      string `yaml:"resource"`
				Divisor       string `yaml:"divisor"`
			} `yaml:"resourceFieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	EnvFrom []struct {
		SecretRef *struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	StartupProbe   *probe `yaml:"startupProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

// loadManifests decodes every document of a multi-document YAML file
// strictly enough to catch syntax errors and documents without a kind.
func loadManifests(t *testing.T, rel string) []k8sObject {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(readRepoFile(t, rel)))
	var objs []k8sObject
	for i := 0; ; i++ {
		var o k8sObject
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s document %d: %v", rel, i, err)
		}
		if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
			t.Fatalf("%s document %d: missing apiVersion, kind or metadata.name", rel, i)
		}
		objs = append(objs, o)
	}
	if len(objs) == 0 {
		t.Fatalf("%s: no documents", rel)
	}
	return objs
}

func findObject(t *testing.T, objs []k8sObject, kind, name string) k8sObject {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && (name == "" || o.Metadata.Name == name) {
			return o
		}
	}
	t.Fatalf("no %s %q", kind, name)
	return k8sObject{}
}

func decodeSpec[T any](t *testing.T, o k8sObject) T {
	t.Helper()
	var v T
	if err := o.Spec.Decode(&v); err != nil {
		t.Fatalf("%s %s: decode spec: %v", o.Kind, o.Metadata.Name, err)
	}
	return v
}

// checkDaemonContainer checks what both examples need of the compactord
// container: the run command on a mounted config, an image pinned by
// digest, GOMEMLIMIT from the memory limit, probes on /-/healthy and (for
// the standalone daemon) /-/ready through the named HTTP port, resource
// requests, a hardened security context. A native sidecar has neither a
// startup nor a readiness probe: both count for the writer's pod (the
// startup probe holds the writer's start, readiness is part of the pod's),
// and /-/ready waits for the first sync of every table.
func checkDaemonContainer(t *testing.T, c container, pod podSpec, sidecar bool) {
	t.Helper()
	if !regexp.MustCompile(`^[^:@]+(:[^@]+)?@sha256:`).MatchString(c.Image) {
		t.Errorf("container %s image %q is not pinned by digest (NAME@sha256:DIGEST)", c.Name, c.Image)
	}
	memlimit := false
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil {
			r := e.ValueFrom.ResourceFieldRef
			// Bytes: GOMEMLIMIT reads a bare number as bytes, so a divisor
			// such as 1Mi would set a limit a millionth of the intended.
			memlimit = r.Resource == "limits.memory" && (r.ContainerName == "" || r.ContainerName == c.Name) && (r.Divisor == "" || r.Divisor == "1")
		}
	}
	if !memlimit {
		t.Errorf("container %s: GOMEMLIMIT is not set from its limits.memory (resourceFieldRef, in bytes)", c.Name)
	}
	if len(c.Args) < 3 || c.Args[0] != "run" || c.Args[1] != "--config" {
		t.Errorf("container %s args %v, want run --config FILE", c.Name, c.Args)
	}
	port := ""
	for _, p := range c.Ports {
		if p.Name == "compactord-http" && p.ContainerPort == 9464 {
			port = p.Name
		}
	}
	if port == "" {
		t.Errorf("container %s has no port compactord-http: 9464", c.Name)
	}
	checkProbe := func(kind string, p *probe, path string) {
		switch {
		case p == nil || p.HTTPGet == nil:
			t.Errorf("container %s: no %s httpGet probe", c.Name, kind)
		case p.HTTPGet.Path != path:
			t.Errorf("container %s: %s probe path %q, want %q", c.Name, kind, p.HTTPGet.Path, path)
		case fmt.Sprint(p.HTTPGet.Port) != port && fmt.Sprint(p.HTTPGet.Port) != "9464":
			t.Errorf("container %s: %s probe port %v is not the HTTP port", c.Name, kind, p.HTTPGet.Port)
		}
	}
	checkProbe("liveness", c.LivenessProbe, "/-/healthy")
	switch {
	case sidecar && c.ReadinessProbe != nil:
		t.Errorf("sidecar %s has a readiness probe: it would take the writer's pod out of its Service until compactord is ready", c.Name)
	case sidecar && c.StartupProbe != nil:
		t.Errorf("sidecar %s has a startup probe: it would hold the writer's start", c.Name)
	case !sidecar:
		checkProbe("readiness", c.ReadinessProbe, "/-/ready")
		if c.StartupProbe != nil {
			checkProbe("startup", c.StartupProbe, "/-/healthy")
		}
	}
	if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" {
		t.Errorf("container %s: resources.requests %v, want cpu and memory", c.Name, c.Resources.Requests)
	}
	if c.Resources.Limits["memory"] == "" {
		t.Errorf("container %s: no memory limit", c.Name)
	}
	sc := c.SecurityContext
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || !sc.ReadOnlyRootFilesystem ||
		!reflect.DeepEqual(sc.Capabilities.Drop, []string{"ALL"}) {
		t.Errorf("container %s: securityContext %+v, want no privilege escalation, a read-only root and all capabilities dropped", c.Name, sc)
	}
	if !pod.SecurityContext.RunAsNonRoot || pod.SecurityContext.RunAsUser == 0 {
		t.Errorf("pod securityContext %+v, want runAsNonRoot with a non-zero runAsUser", pod.SecurityContext)
	}
	// The config file the args name comes from a mounted ConfigMap.
	mounted := false
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(c.Args[2], m.MountPath+"/") {
			for _, v := range pod.Volumes {
				if v.Name == m.Name && v.ConfigMap != nil {
					mounted = true
				}
			}
		}
	}
	if !mounted {
		t.Errorf("container %s: config %s is not on a mounted ConfigMap", c.Name, c.Args[2])
	}
}

// checkConfigMap checks that the ConfigMap's compactord.yaml is a valid
// daemon configuration, as `compactord run` would load it, and returns it.
func checkConfigMap(t *testing.T, objs []k8sObject, name string) daemon.Config {
	t.Helper()
	cm := findObject(t, objs, "ConfigMap", name)
	src, ok := cm.Data["compactord.yaml"].(string)
	if !ok {
		t.Fatalf("ConfigMap %s has no data.compactord.yaml", name)
	}
	cfg, err := daemon.Parse([]byte(src), "ConfigMap/"+name, daemon.Overrides{})
	if err != nil {
		t.Fatalf("ConfigMap %s: compactord.yaml does not load: %v", name, err)
	}
	return cfg
}

func checkScrapeAnnotations(t *testing.T, m k8sMeta) {
	t.Helper()
	want := map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9464", "prometheus.io/path": "/metrics"}
	for k, v := range want {
		if m.Annotations[k] != v {
			t.Errorf("pod template annotation %s=%q, want %q", k, m.Annotations[k], v)
		}
	}
	if m.Labels["compactord/scrape"] != "true" {
		t.Errorf("pod template lacks the label compactord/scrape: \"true\" that podmonitor.yaml selects")
	}
}

// TestKubernetesSidecar checks the native-sidecar example.
func TestKubernetesSidecar(t *testing.T) {
	objs := loadManifests(t, "deploy/kubernetes/sidecar.yaml")
	dep := findObject(t, objs, "Deployment", "")
	spec := decodeSpec[deploymentSpec](t, dep)
	pod := spec.Template.Spec
	checkScrapeAnnotations(t, spec.Template.Metadata)

	// A native sidecar is an init container with restartPolicy: Always;
	// a plain init container would block the writer forever.
	var side *container
	for i := range pod.InitContainers {
		if strings.Contains(pod.InitContainers[i].Image, "compactord") {
			side = &pod.InitContainers[i]
		}
	}
	if side == nil {
		t.Fatalf("no compactord init container in %v", pod.InitContainers)
	}
	if side.RestartPolicy != "Always" {
		t.Errorf("init container %s restartPolicy %q, want Always (a native sidecar)", side.Name, side.RestartPolicy)
	}
	for _, c := range pod.Containers {
		if strings.Contains(c.Image, "compactord") {
			t.Errorf("compactord must be the sidecar, not the regular container %s", c.Name)
		}
	}
	if len(pod.Containers) == 0 {
		t.Fatalf("no writer container beside the sidecar")
	}
	checkDaemonContainer(t, *side, pod, true)
	if pod.TerminationGracePeriodSeconds <= 30 {
		t.Errorf("terminationGracePeriodSeconds %d must exceed shutdown_grace (30s)", pod.TerminationGracePeriodSeconds)
	}

	// Shared credentials: the writer and the sidecar read the same Secret.
	secrets := func(c container) map[string]bool {
		m := map[string]bool{}
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				m[e.SecretRef.Name] = true
			}
		}
		return m
	}
	shared := false
	for s := range secrets(*side) {
		if secrets(pod.Containers[0])[s] {
			shared = true
			findObject(t, objs, "Secret", s)
		}
	}
	if !shared {
		t.Errorf("the writer and the sidecar share no credentials Secret")
	}

	cfg := checkConfigMap(t, objs, "orders-writer-compactord")
	if !strings.HasPrefix(cfg.HTTP.Listen, "0.0.0.0:") {
		t.Errorf("sidecar http.listen %s: the kubelet's probes need the pod IP, use 0.0.0.0:9464", cfg.HTTP.Listen)
	}
	if len(cfg.Tables) == 0 {
		t.Errorf("sidecar config names no table")
	}
	// Every replica's sidecar maintains the same tables.
	if spec.Replicas > 1 && !cfg.Scheduler.Lease.Enabled {
		t.Errorf("%d writer replicas share the sidecar's tables: lease.enabled must be true", spec.Replicas)
	}
}

// TestKubernetesStandalone checks the multi-instance Deployment.
func TestKubernetesStandalone(t *testing.T) {
	objs := loadManifests(t, "deploy/kubernetes/standalone.yaml")
	dep := findObject(t, objs, "Deployment", "compactord")
	spec := decodeSpec[deploymentSpec](t, dep)
	if spec.Replicas < 2 {
		t.Errorf("replicas %d: the multi-instance example wants at least 2", spec.Replicas)
	}
	pod := spec.Template.Spec
	checkScrapeAnnotations(t, spec.Template.Metadata)
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Containers))
	}
	checkDaemonContainer(t, pod.Containers[0], pod, false)
	cfg := checkConfigMap(t, objs, "compactord")
	if !cfg.Scheduler.Lease.Enabled {
		t.Errorf("several replicas share tables: lease.enabled must be true")
	}
	if cfg.Discover.URL == "" && len(cfg.Tables) == 0 {
		t.Errorf("standalone config names no tables and no discover.url")
	}
	if !strings.HasPrefix(cfg.HTTP.Listen, "0.0.0.0:") {
		t.Errorf("http.listen %s: the kubelet's probes need the pod IP", cfg.HTTP.Listen)
	}
	findObject(t, objs, "Service", "compactord")
	findObject(t, objs, "PodDisruptionBudget", "compactord")
}

// TestKubernetesMonitoring checks the PodMonitor and that the
// PrometheusRule carries exactly the groups of the rules file (rewrite it
// with `go test ./internal/testing/e2e -run TestKubernetesMonitoring -update`).
func TestKubernetesMonitoring(t *testing.T) {
	objs := loadManifests(t, "deploy/kubernetes/podmonitor.yaml")
	pm := findObject(t, objs, "PodMonitor", "compactord")
	var spec struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		PodMetricsEndpoints []struct {
			Port string `yaml:"port"`
			Path string `yaml:"path"`
		} `yaml:"podMetricsEndpoints"`
	}
	if err := pm.Spec.Decode(&spec); err != nil {
		t.Fatal(err)
	}
	if spec.Selector.MatchLabels["compactord/scrape"] != "true" || len(spec.PodMetricsEndpoints) != 1 ||
		spec.PodMetricsEndpoints[0].Port != "compactord-http" || spec.PodMetricsEndpoints[0].Path != "/metrics" {
		t.Errorf("PodMonitor spec %+v, want pods labelled compactord/scrape=true on port compactord-http, /metrics", spec)
	}

	const rel = "deploy/kubernetes/prometheusrule.yaml"
	var rules struct {
		Groups []any `yaml:"groups"`
	}
	if err := yaml.Unmarshal(readRepoFile(t, "deploy/prometheus/compactord-rules.yml"), &rules); err != nil {
		t.Fatal(err)
	}
	if *update {
		obj := map[string]any{
			"apiVersion": "monitoring.coreos.com/v1",
			"kind":       "PrometheusRule",
			"metadata": map[string]any{
				"name":      "compactord",
				"namespace": "compactord",
				"labels":    map[string]string{"app.kubernetes.io/name": "compactord"},
			},
			"spec": map[string]any{"groups": rules.Groups},
		}
		var buf bytes.Buffer
		buf.WriteString("# GENERATED from deploy/prometheus/compactord-rules.yml; do not edit.\n" +
			"# Regenerate: go test ./internal/testing/e2e -run TestKubernetesMonitoring -update\n")
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(obj); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(repoFile(t, rel), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pr := findObject(t, loadManifests(t, rel), "PrometheusRule", "compactord")
	var prSpec struct {
		Groups []any `yaml:"groups"`
	}
	if err := pr.Spec.Decode(&prSpec); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(prSpec.Groups, rules.Groups) {
		t.Errorf("%s is out of date with deploy/prometheus/compactord-rules.yml; regenerate it with: go test ./internal/testing/e2e -run TestKubernetesMonitoring -update", rel)
	}
}

// TestExampleConfigs loads the systemd example configuration the way
// `compactord run` does.
func TestExampleConfigs(t *testing.T) {
	const rel = "deploy/systemd/compactord.yaml"
	if _, err := daemon.Parse(readRepoFile(t, rel), rel, daemon.Overrides{}); err != nil {
		t.Errorf("%s: %v", rel, err)
	}
}
