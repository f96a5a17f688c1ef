package k8scheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// repo is the repository's root, from this package's directory.
var repo = filepath.Join("..", "..")

// manifests are the files of plain Kubernetes objects; values files are Helm values.
var (
	manifests = []string{"configs/k8s/pod.yaml", "configs/k8s/z2jh/mcp-hub.yaml"}
	values    = []string{"configs/k8s/z2jh/values.yaml", "configs/k8s/z2jh/pod-sidecar-values.yaml"}
)

// ourImage is the repository of the image the Dockerfile builds.
const ourImage = "ghcr.io/jupyter-mcp-sidecar/jupyter-mcp-sidecar"

// externalSecrets are Secrets a manifest may name without defining them: the z2jh
// chart's own ("hub", holding the services' API tokens).
var externalSecrets = []string{"hub"}

// zeroToJupyterHubUserVolume is the chart's user volume (singleuser.storage.dynamic
// volumeNameTemplate), which extra containers may mount.
const zeroToJupyterHubUserVolume = "volume-{user_server}"

// kinds maps each kind the recipes use to its apiVersion and a new typed object.
var kinds = map[string]struct {
	apiVersion string
	obj        func() any
}{
	"Secret":        {"v1", func() any { return &corev1.Secret{} }},
	"Pod":           {"v1", func() any { return &corev1.Pod{} }},
	"Service":       {"v1", func() any { return &corev1.Service{} }},
	"Deployment":    {"apps/v1", func() any { return &appsv1.Deployment{} }},
	"NetworkPolicy": {"networking.k8s.io/v1", func() any { return &networkingv1.NetworkPolicy{} }},
}

// decodeStrict decodes YAML into v refusing unknown and duplicate fields, as kubectl's
// server-side field validation (Strict) does.
func decodeStrict(data []byte, v any) error {
	return yaml.UnmarshalStrict(data, v)
}

// reporter records a problem found, as testing.T.Errorf does.
type reporter func(format string, args ...any)

// decodeManifest decodes every document of a manifest strictly into its k8s.io/api type.
func decodeManifest(file string, data []byte) ([]any, error) {
	var out []any
	for i, doc := range regexp.MustCompile(`(?m)^---[ \t]*$`).Split(string(data), -1) {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return nil, fmt.Errorf("%s document %d: %w", file, i, err)
		}
		if meta.Kind == "" && strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		k, ok := kinds[meta.Kind]
		if !ok || meta.APIVersion != k.apiVersion {
			return nil, fmt.Errorf("%s document %d: %s %s is not a kind this check knows", file, i, meta.APIVersion, meta.Kind)
		}
		obj := k.obj()
		if err := decodeStrict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("%s document %d (%s): %w", file, i, meta.Kind, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

// stripComments drops YAML comment lines.
func stripComments(doc string) string {
	var b strings.Builder
	for line := range strings.Lines(doc) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// imageUser is the final USER of the repository's Dockerfile.
func imageUser(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var user string
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) == 2 && strings.EqualFold(f[0], "USER") {
			user = f[1]
		}
	}
	return user
}

// podCheck checks the references inside one pod spec.
type podCheck struct {
	errorf   reporter
	where    string
	volumes  []string // volume names the containers may mount
	secrets  []string // Secret names the file defines, and the external ones
	user     string   // the image's USER
	networks func(port corev1.ContainerPort) bool
}

// containers checks every container: mounts, probe ports, the image's tag and user.
func (c podCheck) containers(podSC *corev1.PodSecurityContext, cs []corev1.Container) {
	for _, ctr := range cs {
		where := c.where + " container " + ctr.Name
		for _, m := range ctr.VolumeMounts {
			if !slices.Contains(c.volumes, m.Name) {
				c.errorf("%s mounts volume %q, which the pod does not have (%v)", where, m.Name, c.volumes)
			}
		}
		for name, p := range map[string]*corev1.Probe{"liveness": ctr.LivenessProbe, "readiness": ctr.ReadinessProbe, "startup": ctr.StartupProbe} {
			if p == nil {
				continue
			}
			var port *intstr.IntOrString
			switch {
			case p.HTTPGet != nil:
				port = &p.HTTPGet.Port
			case p.TCPSocket != nil:
				port = &p.TCPSocket.Port
			}
			if port != nil && !hasPort(ctr.Ports, *port) {
				c.errorf("%s: %s probe port %s is not a port of the container", where, name, port.String())
			}
		}
		for _, e := range ctr.Env {
			if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil && !slices.Contains(c.secrets, r.SecretKeyRef.Name) {
				c.errorf("%s: env %s names Secret %q, defined nowhere", where, e.Name, r.SecretKeyRef.Name)
			}
		}
		if c.networks != nil {
			for _, p := range ctr.Ports {
				if !c.networks(p) {
					c.errorf("%s: port %d (%s) is admitted by no ingress rule of the network policy: clients and Prometheus cannot reach it", where, p.ContainerPort, p.Name)
				}
			}
		}
		repoName, tag, _ := strings.Cut(ctr.Image, ":")
		if repoName != ourImage {
			continue
		}
		if tag == "" || tag == "latest" {
			c.errorf("%s: image %s: pin a version tag (a pod started later would run another version)", where, ctr.Image)
		}
		nonRoot, uid := podSC != nil && podSC.RunAsNonRoot != nil && *podSC.RunAsNonRoot, podSC != nil && podSC.RunAsUser != nil
		if sc := ctr.SecurityContext; sc != nil {
			nonRoot = nonRoot || sc.RunAsNonRoot != nil && *sc.RunAsNonRoot
			uid = uid || sc.RunAsUser != nil
		}
		if nonRoot && !uid && !regexp.MustCompile(`^[1-9][0-9]*(:[0-9]+)?$`).MatchString(c.user) {
			c.errorf("%s: runAsNonRoot without runAsUser, and the image's USER is %q: the kubelet can verify only a numeric non-root user and refuses to start it", where, c.user)
		}
	}
}

// hasPort says whether port (a name or a number) is one of ports.
func hasPort(ports []corev1.ContainerPort, port intstr.IntOrString) bool {
	return slices.ContainsFunc(ports, func(p corev1.ContainerPort) bool {
		if port.Type == intstr.String {
			return p.Name == port.StrVal
		}
		return p.ContainerPort == port.IntVal
	})
}

// pod checks a pod spec's own volumes, then its containers.
func (c podCheck) pod(spec corev1.PodSpec) {
	for _, v := range spec.Volumes {
		c.volumes = append(c.volumes, v.Name)
		if v.Secret != nil && !slices.Contains(c.secrets, v.Secret.SecretName) {
			c.errorf("%s: volume %s names Secret %q, defined nowhere", c.where, v.Name, v.Secret.SecretName)
		}
	}
	c.containers(spec.SecurityContext, append(spec.InitContainers, spec.Containers...))
}

// matches says whether selector's labels are all among labels.
func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkManifest decodes a manifest and checks the references inside it; user is the
// image's USER.
func checkManifest(file string, data []byte, user string, errorf reporter) {
	objs, err := decodeManifest(file, data)
	if err != nil {
		errorf("%v", err)
		return
	}
	secrets := slices.Clone(externalSecrets)
	type template struct {
		where  string
		labels map[string]string
		spec   corev1.PodSpec
	}
	var templates []template
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Secret:
			secrets = append(secrets, o.Name)
		case *corev1.Pod:
			templates = append(templates, template{"Pod " + o.Name, o.Labels, o.Spec})
		case *appsv1.Deployment:
			if o.Spec.Selector == nil || !matches(o.Spec.Selector.MatchLabels, o.Spec.Template.Labels) {
				errorf("%s: Deployment %s: selector %v does not match its template's labels %v", file, o.Name, o.Spec.Selector, o.Spec.Template.Labels)
			}
			templates = append(templates, template{"Deployment " + o.Name, o.Spec.Template.Labels, o.Spec.Template.Spec})
		}
	}
	for _, tpl := range templates {
		podCheck{errorf: errorf, where: file + ": " + tpl.where, secrets: secrets, user: user}.pod(tpl.spec)
	}
	for _, o := range objs {
		svc, ok := o.(*corev1.Service)
		if !ok {
			continue
		}
		i := slices.IndexFunc(templates, func(tpl template) bool { return matches(svc.Spec.Selector, tpl.labels) })
		if i < 0 {
			errorf("%s: Service %s: selector %v matches no pod", file, svc.Name, svc.Spec.Selector)
			continue
		}
		for _, p := range svc.Spec.Ports {
			target := p.TargetPort
			if target.Type == intstr.Int && target.IntVal == 0 {
				target = intstr.FromInt32(p.Port)
			}
			if !slices.ContainsFunc(templates[i].spec.Containers, func(c corev1.Container) bool { return hasPort(c.Ports, target) }) {
				errorf("%s: Service %s: port %s targets %s, a port of no container of %s", file, svc.Name, p.Name, target.String(), templates[i].where)
			}
		}
	}
}

// read reads a file of the repository.
func read(t *testing.T, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, file))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The manifests decode strictly and their references hold.
func TestManifests(t *testing.T) {
	user := imageUser(t)
	for _, file := range manifests {
		t.Run(file, func(t *testing.T) { checkManifest(file, read(t, file), user, t.Errorf) })
	}
}

// The z2jh chart's values schema and default values (testdata/README.md says where they
// come from).
const (
	zeroToJupyterHubSchema = "testdata/z2jh-4.4.0-values.schema.json"
	zeroToJupyterHubValues = "testdata/z2jh-4.4.0-values.yaml"
)

// chartValues are the chart's default values, as the schema validator takes them.
func chartValues(t *testing.T) any {
	t.Helper()
	data, err := os.ReadFile(zeroToJupyterHubValues)
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// coalesce merges user values over the chart's as Helm does before it validates them:
// maps key by key, anything else replaced, a null deleting the chart's key.
func coalesce(chart, user any) any {
	c, cok := chart.(map[string]any)
	u, uok := user.(map[string]any)
	if !cok || !uok {
		return user
	}
	out := make(map[string]any, len(c))
	for k, v := range c {
		out[k] = v
	}
	for k, v := range u {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = coalesce(c[k], v)
	}
	return out
}

// singleuser is what this check reads of the chart's singleuser values, strictly typed
// as KubeSpawner passes them to Kubernetes.
type singleuser struct {
	ExtraContainers []corev1.Container `json:"extraContainers"`
	Storage         struct {
		ExtraVolumes []corev1.Volume `json:"extraVolumes"`
	} `json:"storage"`
	NetworkPolicy struct {
		Ingress []networkingv1.NetworkPolicyIngressRule `json:"ingress"`
	} `json:"networkPolicy"`
}

// valuesSchema is the chart's values schema, compiled.
func valuesSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(zeroToJupyterHubSchema)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("z2jh.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("z2jh.json")
	if err != nil {
		t.Fatal(err)
	}
	return schema
}

// checkValues validates values merged over chart against schema, decodes the containers,
// volumes and ingress rules they add strictly and checks their references; user is the
// image's USER.
func checkValues(file string, data []byte, schema *jsonschema.Schema, chart any, user string, errorf reporter) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		errorf("%s: %v", file, err)
		return
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		errorf("%s: %v", file, err)
		return
	}
	if err := schema.Validate(coalesce(chart, v)); err != nil {
		errorf("%s does not match the chart's values schema: %v", file, err)
		return
	}
	var vals struct {
		Singleuser json.RawMessage `json:"singleuser"`
	}
	if err := yaml.Unmarshal(data, &vals); err != nil {
		errorf("%s: %v", file, err)
		return
	}
	var su singleuser
	// Strict for what this check types; the rest of singleuser the schema checked.
	if err := decodeKnown(vals.Singleuser, &su); err != nil {
		errorf("%s singleuser: %v", file, err)
		return
	}
	volumes := []string{zeroToJupyterHubUserVolume}
	for _, v := range su.Storage.ExtraVolumes {
		volumes = append(volumes, v.Name)
	}
	admitted := func(p corev1.ContainerPort) bool {
		return slices.ContainsFunc(su.NetworkPolicy.Ingress, func(r networkingv1.NetworkPolicyIngressRule) bool {
			return slices.ContainsFunc(r.Ports, func(np networkingv1.NetworkPolicyPort) bool {
				return np.Port != nil && (np.Port.Type == intstr.Int && np.Port.IntVal == p.ContainerPort || np.Port.Type == intstr.String && np.Port.StrVal == p.Name)
			})
		})
	}
	check := podCheck{errorf: errorf, where: file + ": singleuser.extraContainers", volumes: volumes,
		secrets: externalSecrets, user: user, networks: admitted}
	for _, v := range su.Storage.ExtraVolumes {
		if v.Secret != nil {
			check.secrets = append(check.secrets, v.Secret.SecretName) // created beside the release (the file says by whom)
		}
	}
	if len(su.ExtraContainers) == 0 {
		errorf("%s adds no container", file)
	}
	check.containers(nil, su.ExtraContainers)
}

// The Zero to JupyterHub values match the chart's schema; the containers and volumes
// they add decode strictly into the k8s.io/api types, mount what exists, and every port
// they open is admitted by the singleuser network policy (the chart's default admits
// only the notebook port).
func TestZeroToJupyterHubValues(t *testing.T) {
	schema, chart, user := valuesSchema(t), chartValues(t), imageUser(t)
	for _, file := range values {
		t.Run(file, func(t *testing.T) { checkValues(file, read(t, file), schema, chart, user, t.Errorf) })
	}
}

// decodeKnown decodes the fields of singleuser that v types, each strictly.
func decodeKnown(raw json.RawMessage, v *singleuser) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return err
	}
	var storage map[string]json.RawMessage
	if s, ok := fields["storage"]; ok {
		if err := json.Unmarshal(s, &storage); err != nil {
			return err
		}
	}
	var netpol map[string]json.RawMessage
	if n, ok := fields["networkPolicy"]; ok {
		if err := json.Unmarshal(n, &netpol); err != nil {
			return err
		}
	}
	for name, part := range map[string]struct {
		raw json.RawMessage
		dst any
	}{
		"extraContainers":       {fields["extraContainers"], &v.ExtraContainers},
		"storage.extraVolumes":  {storage["extraVolumes"], &v.Storage.ExtraVolumes},
		"networkPolicy.ingress": {netpol["ingress"], &v.NetworkPolicy.Ingress},
	} {
		if part.raw == nil {
			continue
		}
		if err := decodeStrict(part.raw, part.dst); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// goodPod is a pod of our image whose references all hold.
const goodPod = `apiVersion: v1
kind: Pod
metadata: {name: p, labels: {app: a}}
spec:
  securityContext: {runAsNonRoot: true}
  volumes:
    - {name: state, emptyDir: {}}
  containers:
    - name: c
      image: ghcr.io/jupyter-mcp-sidecar/jupyter-mcp-sidecar:1.2.3
      ports: [{name: metrics, containerPort: 9464}]
      volumeMounts: [{name: state, mountPath: /var/lib/x}]
      readinessProbe: {httpGet: {path: /readyz, port: metrics}}
`

// goodValues add one container whose port the network policy admits.
const goodValues = `singleuser:
  extraContainers:
    - name: c
      image: ghcr.io/jupyter-mcp-sidecar/jupyter-mcp-sidecar:1.2.3
      ports: [{name: mcp, containerPort: 4040}]
      volumeMounts: [{name: "volume-{user_server}", mountPath: /home/jovyan, readOnly: true}]
  networkPolicy:
    ingress:
      - ports: [{port: mcp}]
`

// Each check fails on what it is there to catch, and on nothing else.
func TestChecksCatch(t *testing.T) {
	schema, chart := valuesSchema(t), chartValues(t)
	service := "---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  selector: {app: a}\n  ports: [{name: m, port: 9464, targetPort: metrics}]\n"
	tests := []struct {
		name, values, manifest, user string
		want                         string // "": no problem
	}{
		{name: "a good pod and its service", manifest: goodPod + service, user: "65532:65532"},
		{name: "good values", values: goodValues, user: "65532:65532"},
		{name: "an unknown field", manifest: strings.Replace(goodPod, "readinessProbe:", "readinesProbe:", 1), user: "1:1", want: `unknown field "readinesProbe"`},
		{name: "a kind not known", manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", want: "not a kind this check knows"},
		{name: "a mount of a missing volume", manifest: strings.Replace(goodPod, "{name: state, mountPath", "{name: stat, mountPath", 1), user: "1:1", want: `mounts volume "stat"`},
		{name: "a probe port that is no container port", manifest: strings.Replace(goodPod, "port: metrics}}", "port: metric}}", 1), user: "1:1", want: "readiness probe port metric is not a port"},
		{name: "a service selecting nothing", manifest: goodPod + strings.Replace(service, "{app: a}", "{app: b}", 1), user: "1:1", want: "matches no pod"},
		{name: "a service port targeting nothing", manifest: goodPod + strings.Replace(service, "targetPort: metrics", "targetPort: mcp", 1), user: "1:1", want: "targets mcp, a port of no container"},
		{name: "a deployment selecting another template", user: "1:1", want: "does not match its template's labels",
			manifest: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: a}}\n  template:\n    metadata: {labels: {app: b}}\n    spec: {containers: [{name: c, image: x}]}\n"},
		{name: "a secret defined nowhere", manifest: strings.Replace(goodPod, "{name: state, emptyDir: {}}", "{name: state, secret: {secretName: nope}}", 1), user: "1:1", want: `names Secret "nope"`},
		{name: ":latest", manifest: strings.Replace(goodPod, ":1.2.3", ":latest", 1), user: "1:1", want: "pin a version tag"},
		{name: "runAsNonRoot over a named image user", manifest: goodPod, user: "nonroot:nonroot", want: "the kubelet can verify only a numeric non-root user"},
		{name: "runAsNonRoot over root", manifest: goodPod, user: "0:0", want: "the kubelet can verify only a numeric non-root user"},
		{name: "values the chart refuses", values: goodValues + "  bogus: 1\n", user: "1:1", want: "additional properties 'bogus' not allowed"},
		{name: "a port the network policy does not admit", values: strings.Replace(goodValues, "[{port: mcp}]", "[{port: 8888}]", 1), user: "1:1", want: "admitted by no ingress rule"},
		{name: "a values container field unknown", values: strings.Replace(goodValues, "volumeMounts:", "volumeMount:", 1), user: "1:1", want: "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			errorf := func(format string, args ...any) { got = append(got, fmt.Sprintf(format, args...)) }
			if tt.manifest != "" {
				checkManifest("m.yaml", []byte(tt.manifest), tt.user, errorf)
			} else {
				checkValues("v.yaml", []byte(tt.values), schema, chart, tt.user, errorf)
			}
			if tt.want == "" {
				if len(got) > 0 {
					t.Fatalf("problems found in a good recipe: %q", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], tt.want) {
				t.Fatalf("problems %q, want one saying %q", got, tt.want)
			}
		})
	}
}
